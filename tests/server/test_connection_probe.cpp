// ConnectionProbe (serve/connection_probe.h) finds the socket of a request's connection from the addresses
// cpp-httplib 0.11.4 puts in the Request, and tells when the client has gone: over IPv4 and IPv6 loopback, with
// other connections of the same listener open beside it (each probe finds its own); a close, a reset (SO_LINGER 0)
// and a half-close (the client's shutdown(SHUT_WR)) all count as gone; an open connection does not, nor one with
// unread data waiting (a pipelined next request); addresses that match no socket give -1 and "not closed".
#include <QtTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <httplib.h>

#include "serve/connection_probe.h"

using ts::serve::ConnectionProbe;

namespace {

struct Pair {
    int client = -1, server = -1;
    ~Pair() {
        if (client >= 0) ::close(client);
        if (server >= 0) ::close(server);
    }
};

std::string host(const sockaddr_storage& a) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, buf, sizeof buf);
    else inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, buf, sizeof buf);
    return buf;
}
int port(const sockaddr_storage& a) {
    return a.ss_family == AF_INET ? ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port)
                                  : ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
}

// A listener on the loopback of `family` (-1 when the host has none).
int listenLoopback(int family, sockaddr_storage& addr, socklen_t& len) {
    const int l = ::socket(family, SOCK_STREAM, 0);
    if (l < 0) return -1;
    addr = {};
    if (family == AF_INET) {
        auto& a = reinterpret_cast<sockaddr_in&>(addr);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof a;
    } else {
        auto& a = reinterpret_cast<sockaddr_in6&>(addr);
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_loopback;
        len = sizeof a;
    }
    if (::bind(l, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(l, 8) != 0 ||
        ::getsockname(l, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        ::close(l);
        return -1;
    }
    return l;
}

bool connectPair(int listener, const sockaddr_storage& addr, socklen_t len, Pair& p) {
    p.client = ::socket(addr.ss_family, SOCK_STREAM, 0);
    if (p.client < 0 || ::connect(p.client, reinterpret_cast<const sockaddr*>(&addr), len) != 0) return false;
    p.server = ::accept(listener, nullptr, nullptr);
    return p.server >= 0;
}

// The Request cpp-httplib would make for the server side of `p`.
httplib::Request requestOf(const Pair& p) {
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof local, pl = sizeof peer;
    ::getsockname(p.server, reinterpret_cast<sockaddr*>(&local), &ll);
    ::getpeername(p.server, reinterpret_cast<sockaddr*>(&peer), &pl);
    httplib::Request r;
    r.local_addr = host(local);
    r.local_port = port(local);
    r.remote_addr = host(peer);
    r.remote_port = port(peer);
    return r;
}

}  // namespace

class TestConnectionProbe : public QObject {
    Q_OBJECT
private slots:
    void findsItsOwnSocketAndSeesTheClientGo_data() {
        QTest::addColumn<int>("family");
        QTest::addColumn<QString>("how");
        for (int f : {AF_INET, AF_INET6})
            for (const char* how : {"close", "reset", "half-close"})
                QTest::newRow(qPrintable(QStringLiteral("%1 %2").arg(f == AF_INET ? "IPv4" : "IPv6", how)))
                    << f << QString::fromLatin1(how);
    }
    void findsItsOwnSocketAndSeesTheClientGo() {
        QFETCH(int, family);
        QFETCH(QString, how);
        sockaddr_storage addr{};
        socklen_t len = 0;
        const int l = listenLoopback(family, addr, len);
        if (l < 0) QSKIP("no loopback of this address family on this host");
        std::vector<Pair> pairs(3);  // three connections of one listener: each probe must find its own
        for (Pair& p : pairs) QVERIFY(connectPair(l, addr, len, p));
        ::close(l);
        ConnectionProbe probe(requestOf(pairs[1]));
        ConnectionProbe other(requestOf(pairs[2]));
        QCOMPARE(probe.socket(), pairs[1].server);
        QCOMPARE(other.socket(), pairs[2].server);
        QVERIFY(!probe.peerClosed());
        // Unread data (a pipelined next request) is not a departure.
        QCOMPARE(::write(pairs[1].client, "GET / HTTP/1.1\r\n\r\n", 18), ssize_t(18));
        QTest::qWait(20);
        QVERIFY(!probe.peerClosed());
        if (how == QLatin1String("reset")) {
            linger lg{1, 0};
            ::setsockopt(pairs[1].client, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        if (how == QLatin1String("half-close")) ::shutdown(pairs[1].client, SHUT_WR);
        else {
            ::close(pairs[1].client);
            pairs[1].client = -1;
        }
        QTRY_VERIFY_WITH_TIMEOUT(probe.peerClosed(), 2000);
        QVERIFY(!other.peerClosed());  // the neighbour is still open
    }

    void unknownAddressesKnowNothing() {
        httplib::Request r;
        r.local_addr = "127.0.0.1";
        r.local_port = 1;
        r.remote_addr = "127.0.0.1";
        r.remote_port = 2;
        ConnectionProbe probe(r);
        QCOMPARE(probe.socket(), -1);
        QVERIFY(!probe.peerClosed());
        ConnectionProbe unset{httplib::Request{}};  // no addresses at all (-1 ports)
        QCOMPARE(unset.socket(), -1);
        QVERIFY(!unset.peerClosed());
    }
};

QTEST_GUILESS_MAIN(TestConnectionProbe)
#include "test_connection_probe.moc"
