// engine/io/dotenv: the recipe's .env read, edited and written back without losing a byte of what the
// user wrote (comments, unknown keys, export, quoting, unparsable lines), bash's quoting rules, the
// auto-create from .env.example, and the precedence of environment / command-line values.
#include <QtTest>

#include <QTemporaryDir>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/dotenv.h"

using namespace ts;

namespace {

std::string readAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void writeAll(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

const char* kSample =
    "# TwinSpark settings\n"
    "\n"
    "HEAD_IP=10.0.0.1   # the head\n"
    "export WORKER_IP=\"10.0.0.2\"\n"
    "MY_OWN_THING='keep me'\n"
    "  # indented comment\n"
    "PORT=8888\n"
    "this line is not an assignment\n"
    "LIMIT_MM={\"image\":4,\"video\":1}\n";

}  // namespace

class TestDotEnv final : public QObject {
    Q_OBJECT
private slots:
    void parsesValuesAndComments() {
        const DotEnv env = DotEnv::parse(kSample);
        QCOMPARE(env.get("HEAD_IP").value(), std::string("10.0.0.1"));
        QCOMPARE(env.get("WORKER_IP").value(), std::string("10.0.0.2"));
        QCOMPARE(env.get("MY_OWN_THING").value(), std::string("keep me"));
        QCOMPARE(env.get("PORT").value(), std::string("8888"));
        // Unquoted, bash removes the double quotes (and does no brace expansion in an assignment): the
        // value is what the launcher would see. The line itself is kept as written (next test).
        QCOMPARE(env.get("LIMIT_MM").value(), std::string("{image:4,video:1}"));
        QVERIFY(!env.get("NOPE").has_value());
        QCOMPARE(env.keys().size(), size_t(5));
        QCOMPARE(env.problems().size(), size_t(1));
        QCOMPARE(env.problems()[0].line, 8);
    }

    void untouchedRoundTripIsByteExact() {
        QCOMPARE(DotEnv::parse(kSample).serialize(), std::string(kSample));
        const std::string noFinalNewline = "A=1\n# c\nB=2";
        QCOMPARE(DotEnv::parse(noFinalNewline).serialize(), noFinalNewline);
        QCOMPARE(DotEnv::parse("").serialize(), std::string());
    }

    void setKeepsCommentsExportAndUnknownKeys() {
        DotEnv env = DotEnv::parse(kSample);
        env.set("HEAD_IP", "192.168.1.10");
        env.set("WORKER_IP", "192.168.1.11");
        env.set("PORT", "8888");  // unchanged value: the line stays as written
        env.set("VLLM_API_KEY", "sk-abc def");
        const std::string out = env.serialize();
        QVERIFY(out.find("# TwinSpark settings\n\n") == 0);
        QVERIFY(out.find("HEAD_IP=192.168.1.10   # the head\n") != std::string::npos);
        QVERIFY(out.find("export WORKER_IP=192.168.1.11\n") != std::string::npos);
        QVERIFY(out.find("MY_OWN_THING='keep me'\n") != std::string::npos);
        QVERIFY(out.find("  # indented comment\n") != std::string::npos);
        QVERIFY(out.find("this line is not an assignment\n") != std::string::npos);
        QVERIFY(out.find("LIMIT_MM={\"image\":4,\"video\":1}\n") != std::string::npos);
        QVERIFY(out.ends_with("VLLM_API_KEY='sk-abc def'\n"));
        // And what we wrote reads back to the same values.
        const DotEnv back = DotEnv::parse(out);
        QCOMPARE(back.values(), env.values());
    }

    void quotingRoundTripsAwkwardValues() {
        const std::vector<std::string> values = {"", "plain", "with space", "it's", "a\"b", "$HOME",
                                                 "`x`", "#hash", "tab\there", "back\\slash", "中文 uz‘bek"};
        for (const std::string& v : values) {
            DotEnv env;
            env.set("K", v);
            const DotEnv back = DotEnv::parse(env.serialize());
            QVERIFY2(back.problems().empty(), v.c_str());
            QCOMPARE(back.get("K").value(), v);
        }
    }

    void bashQuotingRules() {
        const DotEnv env = DotEnv::parse(
            "A=\"x \\\"y\\\" \\n\"\nB='no \\escape'\nC=a\"b c\"'d'\nD=#notacomment\nE= # empty\nF=\n");
        QCOMPARE(env.get("A").value(), std::string("x \"y\" \\n"));
        QCOMPARE(env.get("B").value(), std::string("no \\escape"));
        QCOMPARE(env.get("C").value(), std::string("ab cd"));
        QCOMPARE(env.get("D").value(), std::string("#notacomment"));
        QCOMPARE(env.get("E").value(), std::string());
        QCOMPARE(env.get("F").value(), std::string());
        QVERIFY(env.problems().empty());
    }

    void malformedLinesAreReportedAndKept() {
        const std::string text = "A = 1\nB=1 2\nC='open\n1X=2\nGOOD=yes\n";
        const DotEnv env = DotEnv::parse(text);
        QCOMPARE(env.problems().size(), size_t(4));
        QCOMPARE(env.keys(), std::vector<std::string>{"GOOD"});
        QCOMPARE(env.serialize(), text);
    }

    void lastAssignmentWins() {
        DotEnv env = DotEnv::parse("P=1\nP=2\n");
        QCOMPARE(env.get("P").value(), std::string("2"));
        env.set("P", "3");
        QCOMPARE(env.serialize(), std::string("P=1\nP=3\n"));
        QVERIFY(env.remove("P"));
        QVERIFY(!env.remove("P"));
        QCOMPARE(env.serialize(), std::string());
    }

    void refusesValuesItCannotWriteBack() {
        DotEnv env;
        QVERIFY_THROWS_EXCEPTION(Error, env.set("BAD KEY", "x"));
        QVERIFY_THROWS_EXCEPTION(Error, env.set("K", "two\nlines"));
        QVERIFY_THROWS_EXCEPTION(Error, env.set("", "x"));
    }

    void appendAfterFileWithoutFinalNewline() {
        DotEnv env = DotEnv::parse("A=1");
        env.set("B", "2");
        QCOMPARE(env.serialize(), std::string("A=1\nB=2\n"));
    }

    void saveIsAtomicAndPrivate() {
        QTemporaryDir dir;
        const std::string path = dir.filePath(".env").toStdString();
        DotEnv env = DotEnv::parse(kSample);
        env.set("PORT", "9000");
        env.save(path);
        QCOMPARE(readAll(path), env.serialize());
        QCOMPARE(QFile::permissions(QString::fromStdString(path)) & (QFile::ReadOther | QFile::ReadGroup),
                 QFileDevice::Permissions());
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 1);  // no temp left
        QVERIFY_THROWS_EXCEPTION(Error, env.save(dir.filePath("missing/dir/.env").toStdString()));
    }

    void loadOrCreateCopiesTheExample() {
        QTemporaryDir dir;
        const std::string example = dir.filePath(".env.example").toStdString();
        const std::string path = dir.filePath(".env").toStdString();
        writeAll(example, kSample);
        bool created = false;
        DotEnv env = DotEnv::loadOrCreate(path, example, &created);
        QVERIFY(created);
        QCOMPARE(readAll(path), std::string(kSample));
        env.set("PORT", "1234");
        env.save(path);
        env = DotEnv::loadOrCreate(path, example, &created);
        QVERIFY(!created);
        QCOMPARE(env.get("PORT").value(), std::string("1234"));
        QVERIFY_THROWS_EXCEPTION(Error, DotEnv::loadOrCreate(dir.filePath("a").toStdString(),
                                                             dir.filePath("b").toStdString()));
        QVERIFY_THROWS_EXCEPTION(Error, DotEnv::load(dir.filePath("none").toStdString()));
    }

    void environmentAndCommandLineOverrideTheFile() {
        const DotEnv env = DotEnv::parse("PORT=8888\nHEAD_IP=10.0.0.1\n");
        ::setenv("PORT", "9999", 1);
        ::unsetenv("HEAD_IP");
        auto over = DotEnv::environmentOverrides({"PORT", "HEAD_IP"});
        QCOMPARE(over.size(), size_t(1));
        QCOMPARE(env.effective(over).at("PORT"), std::string("9999"));
        over["HEAD_IP"] = "10.1.1.1";  // a command-line value, applied after the environment
        const auto eff = env.effective(over);
        QCOMPARE(eff.at("HEAD_IP"), std::string("10.1.1.1"));
        QCOMPARE(env.get("PORT").value(), std::string("8888"));  // the file itself is untouched
        // An empty variable is no override: the file's value stands (as `twinspark-cli serve` reads it).
        ::setenv("PORT", "", 1);
        QVERIFY(DotEnv::environmentOverrides({"PORT", "HEAD_IP"}).empty());
        ::unsetenv("PORT");
    }

    void shippedExampleParsesCleanly() {
        const DotEnv env = DotEnv::load(TS_SOURCE_DIR "/resources/.env.example");
        QVERIFY(env.problems().empty());
        for (const char* k : {"HEAD_IP", "WORKER_IP", "WORKER_USER", "WORKER_HOME", "PORT", "HEAD_CX7_IF",
                              "WORKER_CX7_IF", "HEAD_CX7_IB", "WORKER_CX7_IB", "VLLM_API_KEY", "KV_CACHE_DTYPE"})
            QVERIFY2(env.contains(k), k);
        QCOMPARE(env.get("KV_CACHE_DTYPE").value(), std::string("fp8"));
        QCOMPARE(env.get("PORT").value(), std::string("8888"));
    }
};

QTEST_APPLESS_MAIN(TestDotEnv)
#include "test_dotenv.moc"
