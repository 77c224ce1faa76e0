#include "serve/connection_probe.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

#include <httplib.h>

namespace ts::serve {

namespace {

// The numeric host and the port of a socket address, as cpp-httplib writes them into a Request
// (getnameinfo with NI_NUMERICHOST).
bool describe(const sockaddr_storage& a, socklen_t len, std::string& host, int& port) {
    char h[NI_MAXHOST], s[NI_MAXSERV];
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, h, sizeof h, s, sizeof s, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return false;
    host = h;
    port = std::atoi(s);
    return true;
}

}  // namespace

ConnectionProbe::ConnectionProbe(const httplib::Request& req)
    : m_localAddr(req.local_addr), m_remoteAddr(req.remote_addr), m_localPort(req.local_port),
      m_remotePort(req.remote_port) {}

int ConnectionProbe::socket() {
    if (m_looked) return m_fd;
    m_looked = true;
    if (m_localPort <= 0 || m_remotePort <= 0) return m_fd;
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return m_fd;
    const int own = dirfd(dir);
    while (dirent* e = readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == own) continue;
        struct stat st {};
        if (fstat(int(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        sockaddr_storage peer{}, local{};
        socklen_t peerLen = sizeof peer, localLen = sizeof local;
        if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &peerLen) != 0) continue;  // listeners, unconnected
        if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&local), &localLen) != 0) continue;
        if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) continue;
        std::string ph, lh;
        int pp = -1, lp = -1;
        if (!describe(peer, peerLen, ph, pp) || pp != m_remotePort || ph != m_remoteAddr) continue;
        if (!describe(local, localLen, lh, lp) || lp != m_localPort || lh != m_localAddr) continue;
        m_fd = int(fd);
        break;
    }
    closedir(dir);
    return m_fd;
}

bool ConnectionProbe::peerClosed() {
    const int fd = socket();
    if (fd < 0) return false;
    pollfd p{fd, POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace ts::serve
