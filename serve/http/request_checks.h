// Internal: the checks on a request's head, in the order server.h lists them, each refusal
// counted in Core::counters. Pure decisions on the head; the connection does the I/O.
#pragma once

#include <cstdint>
#include <optional>

#include "serve/http/server_core.h"

namespace ingero::serve::http::detail {

struct HeadCheck {
  std::optional<Response> refuse;       // answer this, then close: the body stays unread
  const Route* route = nullptr;         // when not refused
  const Authenticator* auth = nullptr;  // to ask next; null: the route needs none
};

// Before authentication: the target is a path, the transfer coding is known (only chunked),
// Host and Origin are accepted, a route matches (404, or 405 with Allow).
HeadCheck check_head(Core& core, const Request& head, bool chunked);

// After `auth` (null: none) decided `d`: 401 with its challenge when refused; 413 when the
// declared `content_length` exceeds the route's limit; 417 for an Expect other than
// 100-continue. nullopt: read the body.
std::optional<Response> check_admission(Core& core, const Route& route, const Authenticator* auth,
                                        const AuthDecision& d,
                                        std::optional<uint64_t> content_length,
                                        const Request& head);

}  // namespace ingero::serve::http::detail
