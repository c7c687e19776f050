// Kept apart from model_routes.cc: a binary that never asks for the real
// factories (the tests) does not pull this object, and so needs no adapters.
#include "host/model_routes.h"

namespace dsh::host {

ModelRoutes::Factories ModelRoutes::DefaultFactories() {
  return Factories{
      .echo = [] { return agent::MakeEchoModel(); },
      .openai = [](agent::OpenAiOptions options) { return agent::MakeOpenAiModel(std::move(options)); },
  };
}

}  // namespace dsh::host
