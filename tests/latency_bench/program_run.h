// Runs the real latency_bench program for the smoke suites: its exit code,
// stdout and stderr. FJORD_LATENCY_BENCH names the program (meson sets it).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "json_value.h"

namespace fjord::bench {

struct ProgramRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string program() {
  const char* path = std::getenv("FJORD_LATENCY_BENCH");
  return path ? path : "";
}

inline ProgramRun run(const std::string& args) {
  const std::string base = ::testing::TempDir() + "latency_bench_smoke_" + std::to_string(::getpid());
  const std::string command = "'" + program() + "' " + args + " > '" + base + ".out' 2> '" + base + ".err'";
  const int status = std::system(command.c_str());
  ProgramRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  ::unlink((base + ".out").c_str());
  ::unlink((base + ".err").c_str());
  return r;
}

inline test::JsonValue json_of(const ProgramRun& r) {
  auto json = test::JsonReader::parse(r.out);
  EXPECT_TRUE(json) << "not one JSON object:\n" << r.out << "\nstderr:\n" << r.err;
  return json ? *json : test::JsonValue{};
}

}  // namespace fjord::bench
