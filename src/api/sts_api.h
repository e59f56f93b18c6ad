// STS, the Query protocol subset trainyard answers (docs/security.md, "STS"): GetCallerIdentity and
// AssumeRole. A request signed for service `sts` (POST / with a form body, or GET with the query)
// is routed here by server.cpp; the reply is STS's XML, errors STS's <ErrorResponse>.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "api/authorize.h"
#include "core/status.h"
#include "http/server.h"

namespace ty::control {
class Controller;
}

namespace ty::api {

struct AuditRecord;

// Verifies the request's signature for service `sts` and names the caller in the audit record.
using StsAuthenticate = std::function<StatusOr<Principal>(AuditRecord* who)>;

// Answers one STS request: reads Action (and its parameters) from the form body or the query,
// authenticates through `authenticate`, records the call (api/audit.h), and runs the action.
// AssumeRole requires sts:AssumeRole on the role's ARN (`authz`), an existing role of this account,
// RoleSessionName 2..64 of [\w+=,.@-] and DurationSeconds 900..43200 (default 3600); it mints a
// session (control/role_sessions.h) that every API then accepts with the role's policies.
http::Response ServeSts(const http::Request& req, control::Controller& controller, const Authorizer& authz,
                        const StsAuthenticate& authenticate, const CallContext& ctx);
// The actions answered: the rows of STS's operation table, in its order.
std::vector<std::string_view> StsActions();

}  // namespace ty::api
