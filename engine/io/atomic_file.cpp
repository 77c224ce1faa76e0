#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace ts {

namespace {

std::string sysError() { return std::strerror(errno); }

// `path` with every symbolic link at its end followed (a dangling link gives the path it names, so the
// file is created there). A loop of links is refused, as the kernel refuses one.
std::string followLinks(const std::string& path) {
    std::string p = path;
    for (int hops = 0; hops < 40; ++hops) {
        struct stat st {};
        if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
        std::string buf(4096, '\0');
        const ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size());
        if (n < 0) fail(ErrorKind::Io, "cannot read the link " + p + ": " + sysError());
        buf.resize(size_t(n));
        if (!buf.empty() && buf.front() == '/') {
            p = buf;
        } else {
            const size_t slash = p.rfind('/');
            p = (slash == std::string::npos ? std::string() : p.substr(0, slash + 1)) + buf;
        }
    }
    fail(ErrorKind::Io, "cannot write " + path + ": too many levels of symbolic links");
}

// The descriptor a name of one of this process's open files stands for (/dev/stdout, /dev/stderr, /dev/fd/N,
// /proc/self/fd/N), else -1. Such a name is written through a duplicate of the descriptor: opening it anew
// would start at offset 0 of a file the shell opened for appending, and following its link would reach a
// "pipe:[…]" pseudo-name or replace the file the output was redirected to.
int openDescriptorOf(const std::string& path) {
    if (path == "/dev/stdout") return STDOUT_FILENO;
    if (path == "/dev/stderr") return STDERR_FILENO;
    for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
        const size_t n = std::strlen(prefix);
        if (path.compare(0, n, prefix) != 0 || path.size() == n || path.size() > n + 9) continue;
        int fd = 0;
        for (size_t i = n; i < path.size(); ++i) {
            if (path[i] < '0' || path[i] > '9') return -1;
            fd = fd * 10 + (path[i] - '0');
        }
        return fd;
    }
    return -1;
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(const std::string& path, mode_t mode, bool keepExistingMode)
    : m_path(path), m_target(path) {
    if (path.empty()) fail(ErrorKind::Io, "cannot write a file with an empty name");
    if (const int fd = openDescriptorOf(path); fd >= 0) {
        m_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (m_fd < 0) fail(ErrorKind::Io, "cannot write " + path + ": " + sysError());
        return;
    }
    struct stat st {};
    bool exists = ::stat(path.c_str(), &st) == 0;  // through any links
    if (exists && S_ISDIR(st.st_mode)) fail(ErrorKind::Io, "cannot write " + path + ": it is a folder");
    if (exists && !S_ISREG(st.st_mode)) {
        // A device, pipe or socket: in place (renaming over /dev/null would replace the device with a file).
        m_fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
        if (m_fd < 0) fail(ErrorKind::Io, "cannot write " + path + ": " + sysError());
        return;
    }
    m_target = followLinks(path);  // a regular file (or none yet): replace the file the links lead to
    exists = ::stat(m_target.c_str(), &st) == 0;
    // Same folder as the target, so that rename() is atomic; pid + counter keep concurrent writers apart.
    static std::atomic<uint64_t> counter{0};
    m_tmp = m_target + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    const mode_t finalMode = exists && keepExistingMode ? (st.st_mode & 07777) : mode;
    m_fd = ::open(m_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, finalMode);
    if (m_fd < 0) {
        const std::string why = sysError();
        fail(ErrorKind::Io, "cannot write " + path + " (creating " + m_tmp + "): " + why);
    }
    if (exists) (void)::fchmod(m_fd, finalMode);  // the umask narrowed open()'s mode
}

AtomicFileWriter::~AtomicFileWriter() {
    if (m_fd >= 0) ::close(m_fd);
    if (!m_committed && !m_tmp.empty()) ::unlink(m_tmp.c_str());
}

void AtomicFileWriter::write(const void* data, uint64_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (size > 0 && m_error.empty()) {
        const ssize_t w = ::write(m_fd, p, size_t(std::min<uint64_t>(size, uint64_t(1) << 30)));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            m_error = w < 0 ? sysError() : "nothing written";
            return;
        }
        p += w;
        size -= uint64_t(w);
    }
}

void AtomicFileWriter::commit() {
    TS_CHECK(!m_committed && m_fd >= 0, "AtomicFileWriter::commit: already committed");
    // fsync of a pipe or a terminal is EINVAL: nothing to make durable there.
    if (m_error.empty() && ::fsync(m_fd) != 0 && !(m_tmp.empty() && (errno == EINVAL || errno == EROFS)))
        m_error = sysError();
    if (::close(m_fd) != 0 && m_error.empty()) m_error = sysError();
    m_fd = -1;
    if (!m_error.empty()) fail(ErrorKind::Io, "cannot write " + m_path + ": " + m_error);
    if (!m_tmp.empty() && ::rename(m_tmp.c_str(), m_target.c_str()) != 0) {
        const std::string why = sysError();
        fail(ErrorKind::Io, "cannot write " + m_path + " (renaming " + m_tmp + " onto it): " + why);
    }
    m_committed = true;
}

void writeFileAtomically(const std::string& path, std::string_view bytes, mode_t mode, bool keepExistingMode) {
    AtomicFileWriter w(path, mode, keepExistingMode);
    w.write(bytes);
    w.commit();
}

}  // namespace ts
