// Test helper: runs the real `twinspark-cli serve` as a child process on a free loopback port (--port 0;
// the port is read from its "listening on" line) and talks to it with cpp-httplib's client. Every wait
// is bounded in time.
#pragma once

#include <QElapsedTimer>
#include <QProcess>
#include <QRegularExpression>
#include <QStringList>
#include <QThread>

#include <signal.h>

#include <atomic>
#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace tstest {

using json = nlohmann::ordered_json;

inline QString chatModelDir() { return QStringLiteral(TS_CHAT_MODEL_DIR); }

class ServerProcess {
public:
    // Starts the server and waits (at most `timeoutMs`) until /health answers 200.
    // The test chat model unless withoutModel(); hermetic unless setEnvironment(): TWINSPARK_ENV=/dev/null, so no
    // deployment .env of the machine's user (serve reads one when present) changes what is tested.
    bool start(const QStringList& extra, int timeoutMs = 60000) {
        QStringList args = {"serve", "--port", "0", "--max-model-len", "2048", "--kv-budget-mib", "64", "--quiet"};
        if (m_withModel) args += QStringList{"--model", chatModelDir()};
        args += extra;
        m_proc.setProcessEnvironment(m_env);
        m_proc.setProcessChannelMode(QProcess::SeparateChannels);
        m_proc.start(QStringLiteral(TS_CLI_PATH), args);
        if (!m_proc.waitForStarted(10000)) return false;
        QElapsedTimer t;
        t.start();
        static const QRegularExpression re("listening on http://[^:]+:(\\d+)/v1");
        while (m_port == 0 && t.elapsed() < timeoutMs) {
            if (m_proc.state() != QProcess::Running) return false;
            m_proc.setReadChannel(QProcess::StandardError);
            m_proc.waitForReadyRead(200);
            m_err += QString::fromUtf8(m_proc.readAllStandardError());
            auto m = re.match(m_err);
            if (m.hasMatch()) m_port = m.captured(1).toInt();
        }
        if (m_port == 0) return false;
        while (t.elapsed() < timeoutMs) {
            auto r = client().Get("/health");
            if (r && r->status == 200) return true;
            QThread::msleep(50);
        }
        return false;
    }
    void withoutModel() { m_withModel = false; }
    void setEnvironment(const QProcessEnvironment& env) { m_env = env; }
    void setWorkingDirectory(const QString& dir) { m_proc.setWorkingDirectory(dir); }
    int port() const { return m_port; }
    std::unique_ptr<httplib::Client> clientPtr(int readTimeoutS = 60) const {
        auto c = std::make_unique<httplib::Client>("127.0.0.1", m_port);
        c->set_read_timeout(readTimeoutS, 0);
        c->set_connection_timeout(5, 0);
        return c;
    }
    httplib::Client& client() {
        if (!m_client) m_client = clientPtr();
        return *m_client;
    }
    // SIGTERM, then wait up to `timeoutMs` for the exit; returns the exit code (-1: crashed / killed).
    int stop(int timeoutMs = 10000) {
        if (m_proc.state() == QProcess::NotRunning) return m_proc.exitStatus() == QProcess::NormalExit ? m_proc.exitCode() : -1;
        ::kill(pid_t(m_proc.processId()), SIGTERM);
        if (!m_proc.waitForFinished(timeoutMs)) {
            m_proc.kill();
            m_proc.waitForFinished(5000);
            return -1;
        }
        m_err += QString::fromUtf8(m_proc.readAllStandardError());
        return m_proc.exitStatus() == QProcess::NormalExit ? m_proc.exitCode() : -1;
    }
    bool running() const { return m_proc.state() == QProcess::Running; }
    // Waits up to `timeoutMs` for the process to end by itself (no signal sent); true when it has.
    bool waitForExit(int timeoutMs) { return m_proc.state() == QProcess::NotRunning || m_proc.waitForFinished(timeoutMs); }
    QString log() {
        m_err += QString::fromUtf8(m_proc.readAllStandardError());
        return m_err;
    }
    ~ServerProcess() {
        if (m_proc.state() != QProcess::NotRunning) {
            m_proc.kill();
            m_proc.waitForFinished(5000);
        }
    }

    static QProcessEnvironment hermeticEnvironment() {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("TWINSPARK_ENV"), QStringLiteral("/dev/null"));
        return env;
    }

private:
    QProcessEnvironment m_env = hermeticEnvironment();
    bool m_withModel = true;
    QProcess m_proc;
    QString m_err;
    int m_port = 0;
    std::unique_ptr<httplib::Client> m_client;
};

// One SSE stream read to the end: the `data:` payloads in order.
struct SseResult {
    int status = 0;
    std::vector<std::string> data;  // payloads, "[DONE]" included
    std::string raw;
    bool ok = false;
};

// stopAfterChunks >= 0: disconnect after that many events; `stop`: disconnect once it is set.
inline SseResult postStream(httplib::Client& c, const std::string& path, const json& body, const httplib::Headers& h = {},
                            int stopAfterChunks = -1, const std::atomic<bool>* stop = nullptr) {
    SseResult out;
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.headers = h;
    req.headers.emplace("Content-Type", "application/json");
    req.body = body.dump();
    int chunks = 0;
    req.response_handler = [&](const httplib::Response& r) {
        out.status = r.status;
        return true;
    };
    req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
        out.raw.append(d, n);
        size_t pos;
        while ((pos = out.raw.find("\n\n")) != std::string::npos) {
            std::string ev = out.raw.substr(0, pos);
            out.raw.erase(0, pos + 2);
            if (ev.rfind("data: ", 0) == 0) {
                out.data.push_back(ev.substr(6));
                ++chunks;
            }
        }
        if (stop && stop->load()) return false;
        return stopAfterChunks < 0 || chunks < stopAfterChunks;
    };
    auto res = c.send(req);
    out.ok = bool(res);
    if (res && out.status == 0) out.status = res->status;
    return out;
}

}  // namespace tstest
