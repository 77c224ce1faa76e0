// engine/io/default_paths: where the embedded default model and the deployment .env are looked for when the user
// names neither (the headless server and the control center share these rules).
#include <QTemporaryDir>
#include <QtTest>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "io/default_paths.h"

namespace fs = std::filesystem;

namespace {

void makeModel(const fs::path& dir) {
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << "{}";
}

fs::path realPath(const fs::path& p) {
    std::error_code ec;
    const fs::path c = fs::canonical(p, ec);
    return ec ? fs::path() : c;
}

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : m_name(name) {
        if (const char* old = std::getenv(name)) m_old = old;
        if (value) ::setenv(name, value, 1);
        else ::unsetenv(name);
    }
    ~ScopedEnv() {
        if (m_old) ::setenv(m_name, m_old->c_str(), 1);
        else ::unsetenv(m_name);
    }

private:
    const char* m_name;
    std::optional<std::string> m_old;
};

class ScopedCwd {
public:
    explicit ScopedCwd(const fs::path& dir) : m_old(fs::current_path()) { fs::current_path(dir); }
    ~ScopedCwd() { fs::current_path(m_old); }

private:
    fs::path m_old;
};

}  // namespace

class TestDefaultPaths final : public QObject {
    Q_OBJECT
private slots:
    void nameIsTheShippedFolder() {
        QCOMPARE(ts::defaultModelName(), std::string("glm5-next-tiny-exl3"));
        QVERIFY(fs::is_regular_file(fs::path(TS_SOURCE_DIR) / "resources/models" / ts::defaultModelName() / "config.json"));
        // and its BF16 original beside it
        QCOMPARE(ts::defaultModelOriginalName(), std::string("glm5-next-tiny"));
        QVERIFY(fs::is_regular_file(fs::path(TS_SOURCE_DIR) / "resources/models" / ts::defaultModelOriginalName() /
                                    "config.json"));
    }

    // Installed (<prefix>/share/twinspark/models) first, then the source tree seen from a build directory, the
    // working directory, the compiled-in source tree; a folder without config.json is no model; nothing → nullopt.
    void lookupOrder() {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        const fs::path root = tmp.path().toStdString(), prefix = root / "prefix", src = root / "src",
                       empty = root / "empty";
        const std::string& name = ts::defaultModelName();
        fs::create_directories(prefix / "bin");
        fs::create_directories(src / "build/app");
        fs::create_directories(empty);
        QVERIFY(!ts::findDefaultModel(prefix / "bin", empty, {}));
        QVERIFY(!ts::findDefaultModel({}, {}, {}));

        makeModel(src / "resources/models" / name);
        const fs::path inSrc = realPath(src / "resources/models" / name);
        QCOMPARE(realPath(*ts::findDefaultModel(src / "build/app", empty, {})), inSrc);
        QCOMPARE(realPath(*ts::findDefaultModel(prefix / "bin", src, {})), inSrc);
        QCOMPARE(realPath(*ts::findDefaultModel(prefix / "bin", empty, src)), inSrc);

        makeModel(prefix / "share/twinspark/models" / name);
        const auto installed = ts::findDefaultModel(prefix / "bin", src, src);
        QVERIFY(installed && installed->is_absolute());
        QCOMPARE(realPath(*installed), realPath(prefix / "share/twinspark/models" / name));
        // lexically clean: no "bin/.." left in what is printed and served
        QVERIFY2(installed->string().find("..") == std::string::npos, installed->c_str());

        fs::remove(prefix / "share/twinspark/models" / name / "config.json");
        QCOMPARE(realPath(*ts::findDefaultModel(prefix / "bin", src, src)), inSrc);
    }

    void candidatesAreCleanAndUnique() {
        const auto c = ts::defaultModelCandidates("/opt/ts/bin", "/opt/ts/bin/../..", "/");
        QCOMPARE(c.size(), size_t(5));  // the working directory /opt repeats the second
        QCOMPARE(c[0], fs::path("/opt/ts/share/twinspark/models/glm5-next-tiny-exl3"));
        QCOMPARE(c[1], fs::path("/opt/resources/models/glm5-next-tiny-exl3"));
        QCOMPARE(c[2], fs::path("/opt/ts/resources/models/glm5-next-tiny-exl3"));
        QCOMPARE(c[3], fs::path("/opt/ts/bin/resources/models/glm5-next-tiny-exl3"));
        QCOMPARE(c[4], fs::path("/resources/models/glm5-next-tiny-exl3"));
        QVERIFY(ts::defaultModelCandidates({}, {}, {}).empty());
    }

    void executableDirIsThisTestsFolder() {
        const fs::path dir = ts::executableDir();
        QVERIFY(!dir.empty());
        QCOMPARE(realPath(dir), realPath(QCoreApplication::applicationDirPath().toStdString()));
    }

    // $TWINSPARK_ENV, else ./.env when it exists, else Qt's AppConfigLocation for TwinSpark/TwinSpark
    // ($XDG_CONFIG_HOME when absolute, else ~/.config).
    void envFileOrder() {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        const fs::path root = tmp.path().toStdString();
        fs::create_directories(root / "work");
        ScopedCwd cwd(root / "work");
        ScopedEnv home("HOME", (root / "home").c_str());
        {
            ScopedEnv named("TWINSPARK_ENV", "/somewhere/deploy.env");
            QCOMPARE(ts::defaultEnvPath(), fs::path("/somewhere/deploy.env"));
        }
        ScopedEnv unnamed("TWINSPARK_ENV", "");  // empty counts as unset
        {
            ScopedEnv xdg("XDG_CONFIG_HOME", nullptr);
            QCOMPARE(ts::defaultEnvPath(), root / "home/.config/TwinSpark/TwinSpark/.env");
        }
        {
            ScopedEnv xdg("XDG_CONFIG_HOME", (root / "xdg").c_str());
            QCOMPARE(ts::defaultEnvPath(), root / "xdg/TwinSpark/TwinSpark/.env");
        }
        {
            ScopedEnv xdg("XDG_CONFIG_HOME", "relative/config");  // ignored, as the XDG spec and Qt do
            QCOMPARE(ts::defaultEnvPath(), root / "home/.config/TwinSpark/TwinSpark/.env");
        }
        std::ofstream(root / "work/.env") << "PORT=8888\n";
        QCOMPARE(realPath(ts::defaultEnvPath()), realPath(root / "work/.env"));
        QVERIFY(ts::defaultEnvPath().is_absolute());
    }
};

QTEST_GUILESS_MAIN(TestDefaultPaths)
#include "test_default_paths.moc"
