// io/atomic_file: a file is replaced whole or not at all; links are followed (the link stays), devices are
// written in place (never replaced by a file), folders refused, write errors reported with the old file kept.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/dotenv.h"

using namespace ts;

namespace {

std::string readAll(const QString& path) {
    std::ifstream in(path.toStdString(), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void writeRaw(const QString& path, const std::string& text) {
    std::ofstream out(path.toStdString(), std::ios::binary);
    out << text;
}

// The files in `dir` (hidden ones too): a leftover temporary shows up here.
int fileCount(const QTemporaryDir& dir) {
    return int(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden | QDir::System).size());
}

}  // namespace

class TestAtomicFile : public QObject {
    Q_OBJECT
private slots:
    void replacesWholeAndKeepsPermissions() {
        QTemporaryDir dir;
        const QString p = dir.filePath("r.json");
        writeFileAtomically(p.toStdString(), "new");
        QCOMPARE(readAll(p), std::string("new"));
        QVERIFY(::chmod(p.toLocal8Bit().constData(), 0600) == 0);
        writeFileAtomically(p.toStdString(), "newer");
        QCOMPARE(readAll(p), std::string("newer"));
        struct stat st {};
        QVERIFY(::stat(p.toLocal8Bit().constData(), &st) == 0);
        QCOMPARE(int(st.st_mode & 0777), 0600);
        QCOMPARE(fileCount(dir), 1);
    }

    void uncommittedLeavesTheOldFile() {
        QTemporaryDir dir;
        const QString p = dir.filePath("r.json");
        writeRaw(p, "good report");
        {
            AtomicFileWriter w(p.toStdString());
            w.write("half");
        }  // an interrupted run: never committed
        QCOMPARE(readAll(p), std::string("good report"));
        QCOMPARE(fileCount(dir), 1);
    }

    void followsLinks() {
        QTemporaryDir dir;
        const QString target = dir.filePath("real.env"), link = dir.filePath(".env");
        writeRaw(target, "A=1\n");
        QVERIFY(QFile::link(target, link));
        DotEnv env = DotEnv::parse("A=1\n");
        env.set("A", "2");
        env.save(link.toStdString());
        QVERIFY(QFileInfo(link).isSymLink());
        QCOMPARE(readAll(target), std::string("A=2\n"));
        // A dangling link: the file it names is created, the link kept.
        const QString dangling = dir.filePath("out.json");
        QVERIFY(QFile::link(dir.filePath("made.json"), dangling));
        writeFileAtomically(dangling.toStdString(), "{}");
        QVERIFY(QFileInfo(dangling).isSymLink());
        QCOMPARE(readAll(dir.filePath("made.json")), std::string("{}"));
    }

    void devicesAreWrittenInPlace() {
        writeFileAtomically("/dev/null", "discarded");
        struct stat st {};
        QVERIFY(::stat("/dev/null", &st) == 0);
        QVERIFY(S_ISCHR(st.st_mode));
        // /dev/full: every write fails with ENOSPC, which is reported (failedWriteKeepsTheOldFile covers a failing
        // write where a container has no /dev/full).
        if (!QFileInfo::exists(QStringLiteral("/dev/full"))) QSKIP("no /dev/full here");
        try {
            writeFileAtomically("/dev/full", "x");
            QFAIL("writing /dev/full did not fail");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ErrorKind::Io);
            QVERIFY2(std::string(e.what()).find("/dev/full") != std::string::npos, e.what());
        }
    }

    // A name of an open descriptor (/dev/fd/N, as /dev/stdout is for 1) is written through that descriptor: into
    // a pipe, and appended to a file opened for appending (the file is not replaced, nor written from offset 0).
    void descriptorNamesWriteThroughTheDescriptor() {
        int p[2];
        QVERIFY(::pipe(p) == 0);
        writeFileAtomically("/dev/fd/" + std::to_string(p[1]), "through the pipe");
        ::close(p[1]);
        char buf[64] = {};
        QCOMPARE(::read(p[0], buf, sizeof buf), ssize_t(16));
        ::close(p[0]);
        QCOMPARE(std::string(buf), std::string("through the pipe"));
        QTemporaryDir dir;
        const QString log = dir.filePath("log.txt");
        writeRaw(log, "earlier\n");
        struct stat before {};
        QVERIFY(::stat(log.toLocal8Bit().constData(), &before) == 0);
        const int fd = ::open(log.toLocal8Bit().constData(), O_WRONLY | O_APPEND);
        QVERIFY(fd >= 0);
        writeFileAtomically("/proc/self/fd/" + std::to_string(fd), "report\n");
        ::close(fd);
        QCOMPARE(readAll(log), std::string("earlier\nreport\n"));
        struct stat after {};
        QVERIFY(::stat(log.toLocal8Bit().constData(), &after) == 0);
        QCOMPARE(after.st_ino, before.st_ino);
    }

    // The .env holds secrets: saved, it is 0600 even when it was a copy of the 0644 example.
    void dotenvSaveIsPrivateEvenOverAPublicFile() {
        QTemporaryDir dir;
        const QString p = dir.filePath(".env");
        writeRaw(p, "A=1\n");
        QVERIFY(::chmod(p.toLocal8Bit().constData(), 0644) == 0);
        DotEnv env = DotEnv::parse("A=1\n");
        env.set("VLLM_API_KEY", "secret");
        env.save(p.toStdString());
        struct stat st {};
        QVERIFY(::stat(p.toLocal8Bit().constData(), &st) == 0);
        QCOMPARE(int(st.st_mode & 0777), 0600);
    }

    void refusesFoldersAndMissingParents() {
        QTemporaryDir dir;
        QVERIFY_THROWS_EXCEPTION(Error, writeFileAtomically(dir.path().toStdString(), "x"));
        QVERIFY_THROWS_EXCEPTION(Error, writeFileAtomically(dir.filePath("no/such/dir/x").toStdString(), "x"));
        QVERIFY_THROWS_EXCEPTION(Error, writeFileAtomically("", "x"));
    }

    // A write that fails part-way (here: the file-size limit, as a full disk would) keeps the old file and leaves
    // no temporary behind.
    void failedWriteKeepsTheOldFile() {
        QTemporaryDir dir;
        const QString p = dir.filePath("r.json");
        writeRaw(p, "good report");
        struct rlimit old {};
        QVERIFY(::getrlimit(RLIMIT_FSIZE, &old) == 0);
        ::signal(SIGXFSZ, SIG_IGN);
        struct rlimit small = old;
        small.rlim_cur = 4096;
        QVERIFY(::setrlimit(RLIMIT_FSIZE, &small) == 0);
        bool threw = false;
        try {
            writeFileAtomically(p.toStdString(), std::string(100000, 'x'));
        } catch (const Error& e) {
            threw = true;
            QVERIFY2(std::string(e.what()).find(p.toStdString()) != std::string::npos, e.what());
        }
        QVERIFY(::setrlimit(RLIMIT_FSIZE, &old) == 0);
        ::signal(SIGXFSZ, SIG_DFL);
        QVERIFY(threw);
        QCOMPARE(readAll(p), std::string("good report"));
        QCOMPARE(fileCount(dir), 1);
    }

    void dotenvLoadRefusesPipesAndHugeFiles() {
        QTemporaryDir dir;
        const QString fifo = dir.filePath("fifo.env");
        QVERIFY(::mkfifo(fifo.toLocal8Bit().constData(), 0600) == 0);
        QVERIFY_THROWS_EXCEPTION(Error, DotEnv::load(fifo.toStdString()));  // would block forever
        QVERIFY_THROWS_EXCEPTION(Error, DotEnv::load("/dev/zero"));        // endless
        QVERIFY_THROWS_EXCEPTION(Error, DotEnv::load(dir.path().toStdString()));
        QCOMPARE(DotEnv::load("/dev/null").serialize(), std::string());    // the tests' empty .env
    }
};

QTEST_GUILESS_MAIN(TestAtomicFile)

#include "test_atomic_file.moc"
