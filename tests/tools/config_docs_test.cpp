// docs/configuration.md stays true: every parameter table that
// `fjord-config --reference` generates from the code's specs must appear in
// it verbatim. Regenerate the section between the BEGIN/END markers with
// that command when a parameter changes.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string run(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  ::pclose(p);
  return out;
}

TEST(ConfigDocsTest, EveryGeneratedTableIsInTheConfigurationReference) {
  const char* tool = std::getenv("FJORD_CONFIG_TOOL");
  const char* docs = std::getenv("FJORD_CONFIG_DOC");
  ASSERT_NE(tool, nullptr) << "meson sets FJORD_CONFIG_TOOL";
  ASSERT_NE(docs, nullptr) << "meson sets FJORD_CONFIG_DOC";
  const std::string generated = run(std::string(tool) + " --reference");
  std::ifstream in(docs);
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  ASSERT_FALSE(generated.empty());
  // Split the generated text into "### ..." blocks.
  std::vector<std::string> blocks;
  std::size_t at = generated.find("### ");
  while (at != std::string::npos) {
    const std::size_t next = generated.find("### ", at + 4);
    blocks.push_back(generated.substr(at, next == std::string::npos ? std::string::npos : next - at));
    at = next;
  }
  ASSERT_GE(blocks.size(), 4u);
  for (const std::string& block : blocks)
    EXPECT_NE(doc.find(block), std::string::npos)
        << "docs/configuration.md is out of date; regenerate with: build/tools/fjord-config --reference\n"
        << "missing:\n"
        << block;
}

}  // namespace
