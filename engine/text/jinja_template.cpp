// Public entry of the renderer: parse once, render many times (each render gets its own interpreter,
// so a JinjaTemplate may be shared between threads).
#include "text/jinja_template.h"

#include "text/jinja_ast.h"
#include "text/jinja_interpreter.h"

namespace ts::jinja {

JinjaTemplate::JinjaTemplate(std::string_view source, const LexerOptions& lex)
    : m_tpl(std::make_unique<Template>(parseTemplate(source, lex))) {}

JinjaTemplate::~JinjaTemplate() = default;
JinjaTemplate::JinjaTemplate(JinjaTemplate&&) noexcept = default;
JinjaTemplate& JinjaTemplate::operator=(JinjaTemplate&&) noexcept = default;

std::string JinjaTemplate::render(const nlohmann::ordered_json& context, const Object& extra) const {
    Object vars;
    if (context.is_object())
        for (const auto& [k, v] : context.items()) vars.set(k, Value::fromJson(v));
    for (const auto& [k, v] : extra.items()) vars.set(k, v);
    return render(vars);
}

std::string JinjaTemplate::render(const Object& vars) const {
    Interpreter in(limits, vars);
    return in.run(*m_tpl);
}

}  // namespace ts::jinja
