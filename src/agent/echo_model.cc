#include "agent/model.h"

namespace dsh::agent {
namespace {

// Offline and deterministic, so a fresh install works without any provider
// and tests of the agent loop need no network.
class EchoModel final : public ModelAdapter {
 public:
  void Stream(ModelRequest request, std::shared_ptr<CancelToken> cancel, OnDelta on_delta, Done done) override {
    if (cancel && cancel->cancelled()) return done(Status("cancelled", "the model call was cancelled"));
    std::string last_user;
    for (auto it = request.messages.rbegin(); it != request.messages.rend(); ++it) {
      if (it->role == ModelMessage::Role::kUser) {
        last_user = it->text;
        break;
      }
    }
    ModelResponse response;
    response.text = "echo: " + last_user;
    response.finish_reason = "stop";
    if (on_delta) on_delta(ModelDelta{ModelDelta::Kind::kText, response.text});
    done(std::move(response));
  }

  std::string Describe(const std::string& model) const override {
    return (model.empty() ? std::string("echo") : model) + " (offline echo model: replies with your last message)";
  }
};

}  // namespace

std::unique_ptr<ModelAdapter> MakeEchoModel() { return std::make_unique<EchoModel>(); }

}  // namespace dsh::agent
