// The CosId proxy's HTTP routes (docs/protocol.md, "CosId").
//
// The CosId proxy (cosid-proxy-server): machine ids for CosId's snowflake generators and
// segments for its segment generators. Replies as its controllers: 200 with
// {"machineId","lastTimeStamp"}, an empty body, or the new max id; errors as
// {"code","msg","errors"} with CosId's codes M-01 (no free machine id), M-02 (no machine id held)
// and M-03 (the machine id went to another instance), and else the HTTP status ("400", "503").

#include <fmt/format.h>

#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "sekka/secrets.h"
#include "server/commands.h"
#include "server/http_route.h"

namespace sekka::server::routes {

HttpReply CosIdReply(int status, std::string_view code, std::string_view message) {
  return ErrorReply(status, fmt::format("{{\"code\":\"{}\",\"msg\":\"{}\",\"errors\":[]}}", code,
                                        http::JsonEscape(RedactSecrets(message))));
}

namespace {

std::string StableParam(const RouteInput& in) {
  return http::QueryParam(in.query, "stable").value_or("false");
}

// POST /machines/{namespace}: MACHINE.DISTRIBUTE ns bits instance stable guard
Status CosIdDistributeArgs(Service&, const RouteInput& in, ArgList& out) {
  if (Status s = PathSegments(in, 1, "/machines/{namespace}", out); !s.ok()) return s;
  if (Status s = RequiredParam(in, "machineBit", out); !s.ok()) return s;
  if (Status s = RequiredParam(in, "instanceId", out); !s.ok()) return s;
  out.push_back(StableParam(in));
  return RequiredParam(in, "safeGuardDuration", out);
}

// PATCH /machines/{namespace}: MACHINE.GUARD ns instance guard
Status CosIdGuardArgs(Service&, const RouteInput& in, ArgList& out) {
  if (Status s = PathSegments(in, 1, "/machines/{namespace}", out); !s.ok()) return s;
  if (Status s = RequiredParam(in, "instanceId", out); !s.ok()) return s;
  return RequiredParam(in, "safeGuardDuration", out);
}

// DELETE /machines/{namespace}: MACHINE.REVERT ns instance
Status CosIdRevertArgs(Service&, const RouteInput& in, ArgList& out) {
  if (Status s = PathSegments(in, 1, "/machines/{namespace}", out); !s.ok()) return s;
  return RequiredParam(in, "instanceId", out);
}

// A CosId segment "{namespace}/{name}" is the tag "{namespace}.{name}".
Status CosIdTag(const RouteInput& in, std::string_view shape, ArgList& out) {
  ArgList parts;
  if (Status s = PathSegments(in, 2, shape, parts); !s.ok()) return s;
  out.push_back(parts[0] + "." + parts[1]);
  return Status::Ok();
}

// POST /segments/distributor/{namespace}/{name}?offset=&step=: SEG.CREATE tag offset+1 step
Status CosIdCreateArgs(Service&, const RouteInput& in, ArgList& out) {
  if (Status s = CosIdTag(in, "/segments/distributor/{namespace}/{name}", out); !s.ok()) return s;
  std::int64_t offset = 0;
  if (std::optional<std::string> o = http::QueryParam(in.query, "offset"); o) {
    const auto [p, ec] = std::from_chars(o->data(), o->data() + o->size(), offset);
    if (ec != std::errc() || p != o->data() + o->size() || offset < 0 || offset == INT64_MAX) {
      return InvalidArgument(fmt::format("offset \"{}\" is not valid: allowed 0 to {}",
                                         o->substr(0, 40), INT64_MAX - 1));
    }
  }
  out.push_back(std::to_string(offset + 1));  // CosId's first id is offset + 1
  return RequiredParam(in, "step", out);
}

// PATCH /segments/{namespace}/{name}?step=: SEG.RANGE tag step
Status CosIdNextMaxIdArgs(Service&, const RouteInput& in, ArgList& out) {
  if (Status s = CosIdTag(in, "/segments/{namespace}/{name}", out); !s.ok()) return s;
  if (Status s = RequiredParam(in, "step", out); !s.ok()) return s;
  out.push_back("DENSE");  // CosId issues every id of its segment
  return Status::Ok();
}

HttpReply CosIdError(const Error& e, bool machine) {
  int status = MapError(e.code).http_status;
  std::string code = std::to_string(status);  // "400", "404", "503", ...
  if (machine && e.code == ErrorCode::kExhausted) {
    code = "M-01";
    status = 400;
  } else if (machine && e.code == ErrorCode::kNotFound) {
    code = "M-02";
    status = 400;
  } else if (machine && e.code == ErrorCode::kLeaseLost) {
    code = "M-03";
    status = 400;
  }
  return CosIdReply(status, code, e.message);
}

HttpReply CosIdMachineReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return CosIdError(reply.error(), true);
  if (const auto* m = std::get_if<MachineGrant>(&*reply)) {
    return Json(fmt::format("{{\"machineId\":{},\"lastTimeStamp\":{}}}", m->machine_id,
                            m->last_timestamp_ms));
  }
  return Json("");  // guard and revert answer nothing, as CosId's void handlers
}

HttpReply CosIdCreateReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return CosIdError(reply.error(), false);
  return Json("");  // created, or there already: CosId's create is idempotent
}

HttpReply CosIdNextMaxIdReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return CosIdError(reply.error(), false);
  const SegmentGrant& g = std::get<SegmentGrant>(*reply);  // dense: delta 1
  std::string body;
  AppendDec(body, g.range.end - 1);  // CosId's segment is (maxId - step, maxId]
  return Json(std::move(body));
}

}  // namespace

// cosid-proxy-server's MachineController and SegmentController.
const std::vector<HttpRoute>& CosIdRoutes() {
  static const std::vector<HttpRoute> routes = {
      {"POST", "/machines/", true, Auth::kCommand, &Spec(CommandId::kMachineDistribute),
       Command::kMachine, CosIdDistributeArgs, CosIdMachineReply},
      {"PATCH", "/machines/", true, Auth::kCommand, &Spec(CommandId::kMachineGuard),
       Command::kMachine, CosIdGuardArgs, CosIdMachineReply},
      {"DELETE", "/machines/", true, Auth::kCommand, &Spec(CommandId::kMachineRevert),
       Command::kMachine, CosIdRevertArgs, CosIdMachineReply},
      {"POST", "/segments/distributor/", true, Auth::kCommand, &Spec(CommandId::kSegCreate),
       Command::kSegmentCreate, CosIdCreateArgs, CosIdCreateReply},
      {"PATCH", "/segments/", true, Auth::kCommand, &Spec(CommandId::kSegRange),
       Command::kSegmentRange, CosIdNextMaxIdArgs, CosIdNextMaxIdReply},
  };
  return routes;
}

}  // namespace sekka::server::routes
