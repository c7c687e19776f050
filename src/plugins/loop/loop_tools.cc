#include "plugins/loop/loop_tools.h"

#include <optional>
#include <string>
#include <utility>

#include "agent/tool.h"
#include "base/schema.h"

namespace dsh::plugins::loop {
namespace {

Json ViewsJson(const std::vector<LoopRecord>& loops, int64_t now) {
  Json list = Json::array();
  for (const auto& l : loops) list.push_back(LoopViewJson(l, now));
  return list;
}

ObjectSchema<CreateLoopRequest> CreateSchema() {
  return ObjectSchema<CreateLoopRequest>(
             "Creates a loop: delivers `prompt` to a session on a schedule (every N seconds, once after N seconds, "
             "or on a cron rule in a time zone), even while that session is not running.")
      .Field("prompt", &CreateLoopRequest::prompt, "What to deliver at each occurrence.", StringRule{.trim = true})
      .Raw("schedule", false, ScheduleJsonSchema(),
           [](const Json& v, const std::string& path, CreateLoopRequest& out) {
             Schedule s;
             DSH_RETURN_IF_ERROR(DecodeSchedule(v, path, s));
             out.schedule = std::move(s);
             return Status::Ok();
           })
      .Optional("session_id", &CreateLoopRequest::session_id,
                "Target: omitted = this session; \"self\" = the global interface session; \"new\" = a fresh "
                "session for every occurrence; or an existing session id.")
      .Optional("preset", &CreateLoopRequest::preset, "Preset of the fresh sessions; only with session_id \"new\".")
      .Optional("time_in_seconds", &CreateLoopRequest::time_in_seconds,
                "Deprecated: the same as schedule {kind: \"every\", every_seconds}. Not with `schedule`.",
                IntRule{.positive = true, .min = std::nullopt, .max = kMaxSafeInteger});
}

class LoopCreateTool final : public agent::TypedTool<CreateLoopRequest> {
 public:
  explicit LoopCreateTool(std::shared_ptr<LoopService> service)
      : TypedTool("loop_create", CreateSchema()), service_(std::move(service)) {}

 protected:
  void Run(const agent::ToolContext& ctx, CreateLoopRequest req, Done done) override {
    service_->Create(ctx, std::move(req), [service = service_, done = std::move(done)](Result<LoopRecord> r) {
      if (!r.ok()) return done(r.status().WithContext("loop_create"));
      done(LoopViewJson(*r, service->now()));
    });
  }

 private:
  std::shared_ptr<LoopService> service_;
};

struct ListArgs {
  std::optional<std::string> session_id;
};

class LoopListTool final : public agent::TypedTool<ListArgs> {
 public:
  explicit LoopListTool(std::shared_ptr<LoopService> service)
      : TypedTool("loop_list",
                  ObjectSchema<ListArgs>("Lists active loops: this session's by default, every loop of the profile "
                                         "with session_id \"global\", or those targeting one session.")
                      .Optional("session_id", &ListArgs::session_id, "\"global\" or a session id.")),
        service_(std::move(service)) {}

 protected:
  void Run(const agent::ToolContext& ctx, ListArgs args, Done done) override {
    service_->List(ctx, std::move(args.session_id),
                   [service = service_, done = std::move(done)](Result<std::vector<LoopRecord>> r) {
                     if (!r.ok()) return done(r.status().WithContext("loop_list"));
                     done(ViewsJson(*r, service->now()));
                   });
  }

 private:
  std::shared_ptr<LoopService> service_;
};

struct DeleteArgs {
  std::optional<std::string> loop_id;
  std::optional<std::string> id;  // deprecated v1 alias
};

class LoopDeleteTool final : public agent::TypedTool<DeleteArgs> {
 public:
  explicit LoopDeleteTool(std::shared_ptr<LoopService> service)
      : TypedTool("loop_delete",
                  ObjectSchema<DeleteArgs>("Deletes any loop of the profile by its id.")
                      .Optional("loop_id", &DeleteArgs::loop_id, "The loop to delete.")
                      .Optional("id", &DeleteArgs::id, "Deprecated alias of loop_id.")
                      .AddCheck([](const DeleteArgs& a) -> Status {
                        if (a.loop_id && a.id) return InvalidArguments("give `loop_id` or the deprecated `id`, not both");
                        if (!a.loop_id && !a.id) return InvalidArguments("`loop_id` is required");
                        return Status::Ok();
                      })),
        service_(std::move(service)) {}

 protected:
  void Run(const agent::ToolContext&, DeleteArgs args, Done done) override {
    std::string id = args.loop_id ? *args.loop_id : *args.id;
    service_->Delete(id, [id, done = std::move(done)](Status st) {
      if (!st.ok()) return done(st.WithContext("loop_delete"));
      done(Json{{"deleted", true}, {"loop_id", id}});
    });
  }

 private:
  std::shared_ptr<LoopService> service_;
};

}  // namespace

Status RegisterLoopTools(agent::ToolRegistry& tools, std::shared_ptr<LoopService> service) {
  DSH_RETURN_IF_ERROR(tools.Register(std::make_unique<LoopCreateTool>(service), kToolGroup));
  DSH_RETURN_IF_ERROR(tools.Register(std::make_unique<LoopListTool>(service), kToolGroup));
  DSH_RETURN_IF_ERROR(tools.Register(std::make_unique<LoopDeleteTool>(service), kToolGroup));
  return Status::Ok();
}

}  // namespace dsh::plugins::loop
