#include "serve/api_error.h"

#include "core/error.h"

namespace ts::serve {

std::string errorTypeFor(int status) {
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 405: return "method_not_allowed";
    case 413: return "request_too_large";
    case 414: return "uri_too_long";
    case 431: return "request_header_fields_too_large";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

ApiError::ApiError(int status, std::string message, std::string param, std::string type)
    : std::runtime_error(std::move(message)), m_status(status), m_type(type.empty() ? errorTypeFor(status) : type),
      m_param(std::move(param)) {}

json ApiError::body() const {
    json e = json::object();
    e["message"] = what();
    e["type"] = m_type;
    e["param"] = m_param.empty() ? json(nullptr) : json(m_param);
    e["code"] = m_status;
    return json{{"error", std::move(e)}};
}

ApiError fromEngineError(const ts::Error& e, const std::string& param) {
    switch (e.kind()) {
    case ErrorKind::InvalidArgument:
    case ErrorKind::InvalidFile:
    case ErrorKind::Unsupported: return ApiError(400, e.what(), param);
    case ErrorKind::NotFound: return ApiError(404, e.what(), param);
    case ErrorKind::DeviceLost: return ApiError(503, e.what(), param);  // the server is stopping; retry elsewhere / later
    case ErrorKind::Io:
    case ErrorKind::Internal: break;
    }
    return ApiError(500, std::string("internal error: ") + e.what(), param);
}

ApiError unknownModelError(const std::string& asked, const std::string& served) {
    return ApiError(404, "The model `" + asked.substr(0, 200) + "` does not exist. This server serves `" + served + "`.",
                    "model");
}

std::string dumpJson(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace ts::serve
