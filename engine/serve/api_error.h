// Errors at the HTTP edge: the OpenAI error body {"error":{"message","type","param","code"}} (code = the
// HTTP status as an int, as vLLM and llama.cpp do) and the ONE mapping from the engine's typed errors
// (ts::Error kinds) to HTTP statuses. Handlers throw ApiError or let ts::Error propagate; the dispatcher
// turns both into a response here and nowhere else.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace ts {
class Error;
}

namespace ts::serve {

using json = nlohmann::ordered_json;

class ApiError : public std::runtime_error {
public:
    ApiError(int status, std::string message, std::string param = {}, std::string type = {});
    int status() const noexcept { return m_status; }
    const std::string& type() const noexcept { return m_type; }
    const std::string& param() const noexcept { return m_param; }
    json body() const;

private:
    int m_status;
    std::string m_type;
    std::string m_param;
};

// OpenAI's error type for a status: 400 invalid_request_error, 401 authentication_error, 403
// permission_error, 404 not_found_error, 405 method_not_allowed, 413 request_too_large, 431
// request_header_fields_too_large, 503 unavailable_error, other 5xx server_error.
std::string errorTypeFor(int status);

// The one mapping of engine errors: InvalidArgument / InvalidFile (bad request content) -> 400,
// NotFound -> 404, Unsupported -> 400 (a valid request we do not implement), Io / Internal -> 500.
ApiError fromEngineError(const ts::Error& e, const std::string& param = {});

// A request naming a model this server does not serve: 404 (OpenAI's and vLLM's status; the official
// clients raise NotFoundError), param "model".
ApiError unknownModelError(const std::string& asked, const std::string& served);

// Serialises a JSON value for the wire: invalid UTF-8 in strings becomes U+FFFD instead of throwing,
// so a response is always valid JSON.
std::string dumpJson(const json& j);

}  // namespace ts::serve
