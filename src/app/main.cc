#include <iostream>

#include "app/command.h"

int main(int argc, char** argv) {
  dsh::app::CommandContext ctx{std::cout, std::cerr, dsh::RealClock()};
  return dsh::app::RunCli(argc, argv, ctx);
}
