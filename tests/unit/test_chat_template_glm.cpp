// Byte-for-byte parity of our Jinja renderer with jinja2 on the real GLM chat templates in
// ../shared/specs/templates (every template x every case in rendered/), the GLM-5.3-Flash thinking
// override against the recipe's patched template, and a differential corpus rendered at test time by
// python3-jinja2 (tests/unit/jinja_corpus.py). ../shared must exist: a missing folder is a failure.
#include <QtTest>

#include <QDir>
#include <QProcess>
#include <QTemporaryDir>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "text/chat_template.h"
#include "text/jinja_template.h"

using namespace ts;
using ojson = nlohmann::ordered_json;

namespace {

std::string readAll(const QString& path) {
    std::ifstream f(path.toStdString(), std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

QString templatesDir() { return QStringLiteral(TS_SOURCE_DIR "/../shared/specs/templates"); }

// The eight conversations of shared/specs/templates/render.py, as its CASES list builds them.
ojson renderPyCases() {
    const ojson system = {{"role", "system"}, {"content", "You are a helpful assistant."}};
    const ojson user = {{"role", "user"}, {"content", "What is the weather in Paris?"}};
    const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather",
        "description": "Get the current weather for a city.", "parameters": {"type": "object", "properties":
        {"city": {"type": "string", "description": "City name"}, "days": {"type": "integer"}},
        "required": ["city"]}}}])");
    const ojson call = ojson::parse(R"({"role": "assistant", "content": "", "reasoning_content":
        "The user wants the weather; I should call get_weather.", "tool_calls": [{"id": "call_1", "type":
        "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]})");
    ojson callNone = call;
    callNone["content"] = nullptr;
    const ojson result = {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "{\"temp_c\": 18, \"sky\": \"cloudy\"}"}};
    const ojson multi = ojson::parse(R"([{"role": "user", "content": "What is 2+2?"}, {"role": "assistant",
        "reasoning_content": "Simple arithmetic: 2+2=4.", "content": "4"}, {"role": "user", "content": "And 3+3?"}])");
    const ojson mm = ojson::parse(R"([{"role": "user", "content": [{"type": "image"}, {"type": "video"},
        {"type": "text", "text": "Describe the image and the video."}]}])");
    auto c = [](ojson messages, ojson extra = ojson::object()) {
        ojson ctx = {{"bos_token", ""}, {"eos_token", "<|endoftext|>"}, {"messages", std::move(messages)},
                     {"add_generation_prompt", true}};
        for (const auto& [k, v] : extra.items()) ctx[k] = v;
        return ctx;
    };
    ojson cases = ojson::object();
    cases["a_sys_user_gen"] = c({system, user});
    cases["b_sys_user_gen_nothink"] = c({system, user}, {{"enable_thinking", false}});
    cases["c_tools_call_result"] = c({system, user, call, result}, {{"tools", tools}});
    cases["d_multiturn_reasoning"] = c(multi);
    cases["e_multiturn_reasoning_clear_thinking_true"] = c(multi, {{"clear_thinking", true}});
    cases["f_multimodal_user"] = c(mm);
    cases["g_reasoning_effort_low"] = c({system, user}, {{"reasoning_effort", "low"}});
    cases["h_toolcall_content_none"] = c({user, callNone, result}, {{"tools", tools}});
    return cases;
}

QString firstDiff(const std::string& got, const std::string& want) {
    size_t i = 0;
    while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
    const size_t from = i > 40 ? i - 40 : 0;
    return QString("first difference at byte %1\n got: %2\nwant: %3")
        .arg(i)
        .arg(QString::fromStdString(got.substr(from, 120)))
        .arg(QString::fromStdString(want.substr(from, 120)));
}

}  // namespace

class TestChatTemplateGlm : public QObject {
    Q_OBJECT

private slots:
    void sharedFolderExists() {
        QVERIFY2(QDir(templatesDir()).exists(),
                 qPrintable("missing " + templatesDir() + ": the GLM templates must be checked out next to the repo"));
    }

    // Every template x every case of rendered/ equals jinja2's output byte for byte.
    void renderedCasesMatchJinja2() {
        QVERIFY2(QDir(templatesDir()).exists(), "../shared/specs/templates is missing");
        const ojson cases = renderPyCases();
        const QStringList templates = QDir(templatesDir()).entryList({"*.jinja"}, QDir::Files, QDir::Name);
        QVERIFY(templates.size() >= 6);
        int checked = 0;
        for (const QString& name : templates) {
            const jinja::JinjaTemplate tpl(readAll(templatesDir() + "/" + name));
            for (const auto& [caseName, ctx] : cases.items()) {
                const QString expPath =
                    templatesDir() + "/rendered/" + name.chopped(6) + "_" + QString::fromStdString(caseName) + ".txt";
                QVERIFY2(QFile::exists(expPath), qPrintable("missing " + expPath));
                const std::string want = readAll(expPath);
                std::string got;
                try {
                    got = tpl.render(ctx);
                } catch (const std::exception& e) {
                    got = std::string("ERROR: ") + e.what();
                }
                QVERIFY2(got == want, qPrintable(name + " / " + QString::fromStdString(caseName) + ": " + firstDiff(got, want)));
                ++checked;
            }
        }
        // rendered/ holds nothing we did not check.
        QCOMPARE(QDir(templatesDir() + "/rendered").entryList({"*.txt"}, QDir::Files).size(), checked);
    }

    // The vendor GLM-5.3-Flash templates, patched at load, render as the recipe's template does.
    void glm53FlashOverrideMatchesRecipe() {
        const ojson cases = renderPyCases();
        for (const char* vendor : {"glm-5.3-flash.jinja", "glm-5.3-flash_2026-08-27.jinja"}) {
            ChatTemplate ct(readAll(templatesDir() + "/" + vendor), vendor);
            QVERIFY2(ct.thinkingOverrideApplied(), vendor);
            for (const auto& [caseName, ctx] : cases.items()) {
                ojson kw = ojson::object();
                for (const auto& [k, v] : ctx.items())
                    if (k != "messages" && k != "tools" && k != "add_generation_prompt") kw[k] = v;
                const std::string got = ct.render(ctx["messages"], ctx.value("tools", ojson()), true, kw);
                const std::string stem = std::string(vendor) == "glm-5.3-flash.jinja"
                                             ? "glm-5.3-flash_miaai-recipe-patched"
                                             : "glm-5.3-flash_2026-08-27";
                std::string want = readAll(templatesDir() + "/rendered/" + QString::fromStdString(stem) + "_" +
                                           QString::fromStdString(caseName) + ".txt");
                if (stem == "glm-5.3-flash_2026-08-27" && caseName == "b_sys_user_gen_nothink") {
                    // The first release has no recipe rendering: thinking off drops the effort line and
                    // closes the think block, everything else unchanged.
                    const std::string effort = "<|system|>Reasoning Effort: Max";
                    want.erase(want.find(effort), effort.size());
                    want.replace(want.size() - 7, 7, "<think></think>");
                }
                QVERIFY2(got == want, qPrintable(QString(vendor) + " / " + QString::fromStdString(caseName) + ": " +
                                                 firstDiff(got, want)));
            }
        }
        // Other templates are left alone.
        ChatTemplate g47(readAll(templatesDir() + "/glm-4.7-flash.jinja"));
        QVERIFY(!g47.thinkingOverrideApplied());
        ChatTemplate recipe(readAll(templatesDir() + "/glm-5.3-flash_miaai-recipe-patched.jinja"));
        QVERIFY(!recipe.thinkingOverrideApplied());
    }

    void toolCallArgumentsAsStrings() {
        ChatTemplate ct(readAll(templatesDir() + "/glm-4.7-flash.jinja"));
        ojson msgs = ojson::parse(R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f",
            "arguments": "PLACEHOLDER"}}]}])");
        msgs[1]["tool_calls"][0]["function"]["arguments"] = "{\"b\": 1, \"a\": \"x\"}";
        const std::string out = ct.render(msgs, nullptr, false);
        QVERIFY2(out.find("<tool_call>f<arg_key>b</arg_key><arg_value>1</arg_value><arg_key>a</arg_key>"
                          "<arg_value>x</arg_value></tool_call>") != std::string::npos,
                 out.c_str());
        msgs[1]["tool_calls"][0]["function"]["arguments"] = "{not json";
        try {
            ct.render(msgs, nullptr, false);
            QFAIL("unparsable arguments must be rejected");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ErrorKind::InvalidArgument);
            QVERIFY(std::string(e.what()).find("arguments") != std::string::npos);
        }
    }

    void fromModelDir() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        try {
            ChatTemplate::fromModelDir(dir.path().toStdString());
            QFAIL("no template must be NotFound");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ErrorKind::NotFound);
        }
        {
            std::ofstream f((dir.path() + "/tokenizer_config.json").toStdString());
            f << R"({"eos_token": {"content": "<|endoftext|>"}, "bos_token": "[B]",
                    "chat_template": [{"name": "tool_use", "template": "x"},
                                      {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"}]})";
        }
        auto t = ChatTemplate::fromModelDir(dir.path().toStdString());
        QCOMPARE(t.render(ojson::parse(R"([{"role":"user","content":"hi"}])"), nullptr, false),
                 std::string("[B]hi<|endoftext|>"));
        {
            std::ofstream f((dir.path() + "/chat_template.jinja").toStdString());
            f << "{{ messages | length }}{% if add_generation_prompt %}+{% endif %}\n";
        }
        auto t2 = ChatTemplate::fromModelDir(dir.path().toStdString());
        QCOMPARE(t2.render(ojson::parse(R"([{"role":"user","content":"hi"}])"), nullptr, true), std::string("1+"));
        {
            std::ofstream f((dir.path() + "/chat_template.jinja").toStdString());
            f << "{% if %}";
        }
        try {
            ChatTemplate::fromModelDir(dir.path().toStdString());
            QFAIL("syntax error must be reported");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ErrorKind::InvalidFile);
            QVERIFY(std::string(e.what()).find("line 1") != std::string::npos);
        }
    }

    void promptEndsInReasoning() {
        QVERIFY(ChatTemplate::promptEndsInReasoning("<|user|>hi<|assistant|><think>"));
        QVERIFY(!ChatTemplate::promptEndsInReasoning("<|user|>hi<|assistant|><think></think>"));
        QVERIFY(!ChatTemplate::promptEndsInReasoning("<|user|>hi<|assistant|></think>"));
        QVERIFY(!ChatTemplate::promptEndsInReasoning("<|assistant|><think>a</think>b<|user|>c<|assistant|>"));
        QVERIFY(!ChatTemplate::promptEndsInReasoning("<|user|>hi<|assistant|>\n<think></think>\n"));
    }

    // jinja2 renders a generated corpus at test time; we must agree on every case (errors included).
    void differentialCorpusAgainstJinja2() {
        QVERIFY2(QDir(templatesDir()).exists(), "../shared/specs/templates is missing");
        QTemporaryDir out;
        QVERIFY(out.isValid());
        QProcess py;
        py.start("python3", {QStringLiteral(TS_SOURCE_DIR "/tests/unit/jinja_corpus.py"), "--templates", templatesDir(),
                             "--out", out.path(), "--n", "200", "--seed", "20260904"});
        QVERIFY2(py.waitForFinished(120000), "jinja_corpus.py did not finish");
        QVERIFY2(py.exitStatus() == QProcess::NormalExit && py.exitCode() == 0,
                 qPrintable("jinja_corpus.py failed (is python3-jinja2 installed?): " +
                            QString::fromUtf8(py.readAllStandardError())));
        const ojson manifest = ojson::parse(readAll(out.path() + "/manifest.json"));
        QVERIFY(manifest.size() > 1000);
        int failures = 0, errorsAgreed = 0;
        QStringList report;
        for (const auto& e : manifest) {
            const ojson ctx = ojson::parse(readAll(out.path() + "/" + QString::fromStdString(e["context"].get<std::string>())));
            const std::string tplPath = e["template"].get<std::string>();
            std::string got;
            bool threw = false;
            try {
                if (e["kind"] == "override") {
                    ChatTemplate ct(readAll(QString::fromStdString(tplPath)), tplPath);
                    const ojson& api = e["api"];
                    got = ct.render(api["messages"], api["tools"], api["add_generation_prompt"].get<bool>(), api["kwargs"]);
                } else {
                    got = jinja::JinjaTemplate(readAll(QString::fromStdString(tplPath))).render(ctx);
                }
            } catch (const Error& err) {
                threw = true;
                got = err.what();
            }
            const bool wantError = !e["error"].is_null();
            bool ok;
            if (wantError) {
                ok = threw;
                errorsAgreed += ok ? 1 : 0;
            } else {
                ok = !threw && got == readAll(out.path() + "/" + QString::fromStdString(e["expected"].get<std::string>()));
            }
            if (!ok) {
                ++failures;
                if (report.size() < 5)
                    report << QString::fromStdString(e["kind"].get<std::string>() + " " + tplPath + " " +
                                                     e["context"].get<std::string>() + ": " +
                                                     (wantError ? "jinja2 raised " + e["error"].get<std::string>() : "") +
                                                     " got: " + got.substr(0, 300));
            }
        }
        qInfo("differential corpus: %d cases, %d expected errors reproduced, %d mismatches", int(manifest.size()),
              errorsAgreed, failures);
        QVERIFY2(failures == 0, qPrintable(report.join("\n")));
    }
};

QTEST_GUILESS_MAIN(TestChatTemplateGlm)
#include "test_chat_template_glm.moc"
