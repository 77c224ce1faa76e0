// Whether the client of a request is still there, for responses that are not streamed. A streaming response
// notices a vanished client at its next write (a token or the 1 s heartbeat); a non-streaming one writes nothing
// until generation ends, so without this a client that gave up (a timeout, Ctrl-C, the official clients' retry
// after their timeout) left its request running to max_tokens, holding a sequence slot and KV blocks, and the
// retries piled up behind it.
//
// cpp-httplib 0.11.4 gives a handler no way to see its connection (later versions add
// Request::is_connection_closed). The socket is found from what the Request does carry: the descriptor of this
// process whose local and peer address and port are the request's (one TCP connection has exactly one such
// descriptor while its handler runs; httplib closes it only after the handler returns). The peer has gone when
// poll reports a hang-up or the peer's half-close (POLLRDHUP): as uvicorn (vLLM's server), a client that shuts
// down its sending side counts as gone.
#pragma once

#include <string>

namespace httplib {
struct Request;
}

namespace ts::serve {

class ConnectionProbe {
public:
    // Records the request's addresses; the socket is looked up at the first peerClosed() call, so a request
    // that ends quickly pays nothing.
    explicit ConnectionProbe(const httplib::Request& req);

    // True once the client has closed or reset the connection. False while it is open, and when the socket
    // cannot be identified (then nothing is known, and nothing is aborted).
    bool peerClosed();

    // The descriptor found (-1: none); for tests.
    int socket();

private:
    std::string m_localAddr, m_remoteAddr;
    int m_localPort = -1, m_remotePort = -1;
    int m_fd = -1;
    bool m_looked = false;
};

}  // namespace ts::serve
