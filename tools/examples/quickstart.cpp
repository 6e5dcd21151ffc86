// quickstart: the smallest complete fjord program. Connects as an API node,
// creates a table (if needed), writes a row, reads it back in one round
// trip each, and prints it. Built against the installed package:
//
//   g++ -std=c++20 quickstart.cpp $(pkg-config --cflags --libs fjord-client) -o quickstart
//   ./quickstart cluster.ini 50
#include <fjord/client.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: quickstart CONFIG API_NODE_ID\n");
    return 2;
  }
  using namespace fjord;
  api::ConnectOptions options;
  options.config_path = argv[1];
  options.node_id = static_cast<NodeId>(std::atoi(argv[2]));
  options.registry = &client_registry();
  auto connection = api::Connection::connect(options);
  if (!connection) {
    std::fprintf(stderr, "connect: %s\n", connection.status().message().c_str());
    return 1;
  }
  api::Connection& c = **connection;
  auto table = c.get_table("greetings");
  if (!table) {
    engine::TableDef def;
    def.name = "greetings";
    def.columns = {{"id", engine::ColumnType::kUint32, 0, false}, {"text", engine::ColumnType::kVarChar, 64, false}};
    def.primary_key = {0};
    table = c.create_table(def);
    if (!table) {
      std::fprintf(stderr, "create table: %s\n", table.status().message().c_str());
      return 1;
    }
  }
  api::Transaction& write = c.start_transaction();
  write.write(**table, api::Row().set(0, uint32_t{1}).set(1, std::string_view("hello from fjord")));
  if (Status s = write.execute(api::ExecType::kCommit); !s) {
    std::fprintf(stderr, "write: %s\n", s.message().c_str());
    return 1;
  }
  write.close();
  api::Transaction& read = c.start_transaction();
  api::Operation& op = read.read(**table, api::Row().set(0, uint32_t{1}));
  if (Status s = read.execute(api::ExecType::kCommit); !s) {
    std::fprintf(stderr, "read: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("row 1: %.*s\n", static_cast<int>(op.value(1).as_string().size()), op.value(1).as_string().data());
  read.close();
  return 0;
}
