// Writing a file so that a reader, or the user after an interrupted run, finds the old file or the new one,
// never a part of one: the bytes go to a temporary file in the target's folder, are flushed to disk and
// checked, then renamed over the target. Every file the CLI and the control center write (reports,
// safetensors, the deployment .env) goes through here.
//
// What `path` may be:
//   - absent, or a regular file: replaced as above; an existing file keeps its permission bits;
//   - a symbolic link to a regular file (or to none yet): followed to its end, and that file is replaced (the
//     link stays a link);
//   - one of this process's open files by name (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N): written
//     through a duplicate of that descriptor, so `--json /dev/stdout | jq` and `>> log` work as a shell user
//     expects;
//   - a device, a pipe or a socket (/dev/null, a fifo): written in place, as a shell redirect would (nothing can
//     be renamed over it without destroying it), with every write checked;
//   - a folder: refused (ErrorKind::Io).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace ts {

class AtomicFileWriter {
public:
    // Opens the temporary file at once, so that an unwritable place is reported before any long work.
    // `mode`: the permissions of a file that does not exist yet (0644); with keepExistingMode false, of the
    // file whatever it had (0600 for files holding secrets: a copied 0644 .env does not stay readable).
    explicit AtomicFileWriter(const std::string& path, mode_t mode = 0644, bool keepExistingMode = true);
    // Without commit(): the temporary file is removed, the target is left as it was.
    ~AtomicFileWriter();
    AtomicFileWriter(const AtomicFileWriter&) = delete;
    AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

    // Appends bytes. A failure (disk full, I/O error) is remembered and reported by commit().
    void write(const void* data, uint64_t size);
    void write(std::string_view text) { write(text.data(), text.size()); }
    // Flushes to disk, closes and renames over the target; throws ErrorKind::Io naming the path and the
    // reason (the target then keeps its old content).
    void commit();

    const std::string& path() const { return m_path; }      // as given
    const std::string& target() const { return m_target; }  // after following links

private:
    std::string m_path, m_target, m_tmp;  // m_tmp empty: writing in place (a special file)
    int m_fd = -1;
    std::string m_error;  // the first write error
    bool m_committed = false;
};

// The whole of `bytes` through an AtomicFileWriter.
void writeFileAtomically(const std::string& path, std::string_view bytes, mode_t mode = 0644,
                         bool keepExistingMode = true);

}  // namespace ts
