// distributed::Communicator over c10d (TCPStore + ProcessGroupGloo): each rank is a forked process,
// as under torchrun. The children report through a pipe; the parent checks every rank's result.
#include "distributed/communicator.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace quantkit::distributed {
namespace {

using std::chrono::milliseconds;

// Short enough for a fast test, long enough for a loaded 2-core CI machine to connect.
constexpr milliseconds kTestTimeout{20000};
// What "bounded time" means in the fault tests: the timeout plus process start-up.
constexpr double kFaultBoundSeconds = 40.0;

// A port nobody listens on right now (bind to port 0, read it back, close).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

DistributedEnv EnvFor(int rank, int world, int port) {
  DistributedEnv env;
  env.rank = rank;
  env.world_size = world;
  env.local_rank = rank;
  env.local_world_size = world;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.run_id = "test";
  return env;
}

struct RankOutcome {
  int exit_code = -1;  // -1: killed by a signal
  std::string report;  // what the rank wrote to its pipe
};

// Runs `body(rank)` in `ranks.size()` forked processes (only the ranks listed start); each
// child writes body's string to its pipe and exits 0 (or is killed by body itself).
std::map<int, RankOutcome> RunRanks(const std::vector<int>& ranks,
                                    const std::function<std::string(int rank)>& body) {
  std::map<int, std::pair<pid_t, int>> children;
  for (int rank : ranks) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const std::string report = body(rank);
      const ssize_t written = write(fds[1], report.data(), report.size());
      _exit(written == static_cast<ssize_t>(report.size()) ? 0 : 3);
    }
    close(fds[1]);
    children[rank] = {pid, fds[0]};
  }
  std::map<int, RankOutcome> out;
  for (auto& [rank, child] : children) {
    RankOutcome& o = out[rank];
    char buf[4096];
    ssize_t n;
    while ((n = read(child.second, buf, sizeof(buf))) > 0)
      o.report.append(buf, static_cast<size_t>(n));
    close(child.second);
    int status = 0;
    waitpid(child.first, &status, 0);
    o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return out;
}

std::string StatusText(const Status& s) { return s.ok() ? "OK" : s.message(); }

TEST(DistributedEnvTest, NotLaunchedWhenNeitherRankNorWorldSize) {
  auto env = ReadDistributedEnv([](const char*) -> const char* { return nullptr; });
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_FALSE(env->has_value());
}

TEST(DistributedEnvTest, ReadsTorchrunEnvironment) {
  const std::map<std::string, std::string> vars = {{"RANK", "3"},
                                                   {"WORLD_SIZE", "4"},
                                                   {"LOCAL_RANK", "1"},
                                                   {"LOCAL_WORLD_SIZE", "2"},
                                                   {"MASTER_ADDR", "node0"},
                                                   {"MASTER_PORT", "29500"},
                                                   {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                                   {"TORCHELASTIC_RUN_ID", "job7"},
                                                   {"TORCHELASTIC_RESTART_COUNT", "1"}};
  auto env = ReadDistributedEnv([&](const char* n) -> const char* {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  ASSERT_TRUE(env->has_value());
  const DistributedEnv& e = **env;
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "node0");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_TRUE(e.agent_store);
  EXPECT_EQ(e.run_id, "job7.1");
}

// Each broken environment names the variable at fault (instead of hanging at a rendezvous).
TEST(DistributedEnvTest, RejectsPartialOrInconsistentEnvironment) {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"RANK", "0"}}, "WORLD_SIZE"},
      {{{"WORLD_SIZE", "2"}}, "RANK"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}},
       "RANK='2'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "x"}}, "WORLD_SIZE='x'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}, "MASTER_ADDR"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}, "MASTER_PORT"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}},
       "MASTER_PORT='70000'"},
  };
  for (const auto& [vars, expected] : cases) {
    auto env = ReadDistributedEnv([&](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
    ASSERT_FALSE(env.ok()) << expected;
    EXPECT_EQ(env.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(env.status().message().find(expected), std::string::npos) << env.status().message();
  }
}

// torchrun starts one rank per GPU of a machine: plain `cuda` must follow LOCAL_RANK, or every
// rank of a node would compute on GPU 0. An explicit ordinal and the CPU are the user's choice.
TEST(DistributedEnvTest, PlainCudaPicksTheLocalRanksGpu) {
  DistributedEnv env;
  env.rank = 3;
  env.world_size = 4;
  env.local_rank = 1;
  env.local_world_size = 2;
  struct Case {
    std::string text;
    std::optional<DistributedEnv> env;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"cuda", env, "cuda:1"}, {"cuda:0", env, "cuda:0"},        {"cuda:3", env, "cuda:3"},
      {"cpu", env, "cpu"},     {"cuda", std::nullopt, "cuda:0"}, {"cuda:2", std::nullopt, "cuda:2"},
  };
  for (const Case& c : cases) {
    Result<runtime::Device> device = ParseDeviceForRank(c.text, c.env);
    ASSERT_TRUE(device.ok()) << c.text << ": " << device.status().ToString();
    EXPECT_EQ(device->ToString(), c.expected) << c.text << (c.env ? " (launched)" : "");
  }
  // A malformed device is still refused under a launch.
  Result<runtime::Device> bad = ParseDeviceForRank("gpu1", env);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(SingleProcessCommunicatorTest, CollectivesReturnTheInput) {
  auto comm = SingleProcessCommunicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->world_size(), 1);
  std::vector<int64_t> v{5, -7};
  ASSERT_TRUE(comm->AllReduceSum(&v, "sum").ok());
  EXPECT_EQ(v, (std::vector<int64_t>{5, -7}));
  auto g = comm->GatherToRoot("abc", "gather");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, std::vector<std::string>{"abc"});
  const Status bad(StatusCode::kNotFound, "no such file");
  const Status agreed = comm->Agree(bad, "step");
  EXPECT_EQ(agreed.code(), StatusCode::kNotFound);
  EXPECT_EQ(agreed.message(), "no such file");
}

// Three ranks: sums are exact (values past 2^53, where a double sum would round), gathers keep
// rank order and per-rank sizes (an empty contribution included), and a broadcast reaches all.
TEST(GlooCommunicatorTest, CollectivesAreExactAndInRankOrder) {
  const int port = FreePort(), world = 3;
  auto out = RunRanks({0, 1, 2}, [&](int rank) -> std::string {
    auto comm = Connect(EnvFor(rank, world, port), {kTestTimeout});
    if (!comm.ok()) return "connect: " + comm.status().message();
    std::vector<int64_t> v{(int64_t{1} << 60) + rank, -rank};
    if (Status s = (*comm)->AllReduceSum(&v, "sum"); !s.ok()) return "sum: " + s.message();
    std::string r = std::to_string(v[0]) + "," + std::to_string(v[1]) + ";";
    auto all = (*comm)->AllGather(
        std::string(static_cast<size_t>(rank) * 2, static_cast<char>('a' + rank)), "ag");
    if (!all.ok()) return "allgather: " + all.status().message();
    for (const std::string& s : *all) r += "[" + s + "]";
    auto root = (*comm)->GatherToRoot("r" + std::to_string(rank), "gather");
    if (!root.ok()) return "gather: " + root.status().message();
    r += ";" + std::to_string(root->size());
    for (const std::string& s : *root) r += s;
    auto b = (*comm)->Broadcast(rank == 0 ? std::string("from0\0x", 7) : "ignored", "bcast");
    if (!b.ok()) return "broadcast: " + b.status().message();
    r += ";" + std::to_string(b->size()) + b->substr(0, 5);
    return r;
  });
  const std::string sum = std::to_string((int64_t{1} << 60) * 3 + 3) + ",-3;[][bb][cccc];";
  EXPECT_EQ(out[0].exit_code, 0);
  EXPECT_EQ(out[0].report, sum + "3r0r1r2;7from0");
  for (int r : {1, 2}) {
    EXPECT_EQ(out[r].exit_code, 0);
    EXPECT_EQ(out[r].report, sum + "0;7from0") << "rank " << r;
  }
}

// One rank's failure becomes the same error on every rank, naming it, with its code.
TEST(GlooCommunicatorTest, AgreeNamesTheFailingRankEverywhere) {
  const int port = FreePort(), world = 3;
  auto out = RunRanks({0, 1, 2}, [&](int rank) -> std::string {
    auto comm = Connect(EnvFor(rank, world, port), {kTestTimeout});
    if (!comm.ok()) return "connect: " + comm.status().message();
    const Status local =
        rank == 1 ? Status(StatusCode::kInvalidModel, "shard.npy: truncated") : Status::Ok();
    const Status s = (*comm)->Agree(local, "reading data");
    return std::to_string(static_cast<int>(s.code())) + ":" + StatusText(s);
  });
  const std::string code = std::to_string(static_cast<int>(StatusCode::kInvalidModel));
  EXPECT_EQ(out[1].report, code + ":rank 1 of 3: shard.npy: truncated");
  for (int r : {0, 2}) {
    EXPECT_EQ(out[r].report, code + ":rank 1 of 3 failed: shard.npy: truncated") << "rank " << r;
  }
}

// A rank killed between collectives: the survivor's next collective fails within bounded time
// and names it. Without the arrival records it would only say "connection closed".
TEST(GlooCommunicatorTest, KilledRankIsNamedWithinBoundedTime) {
  const int port = FreePort(), world = 2;
  const auto start = std::chrono::steady_clock::now();
  auto out = RunRanks({0, 1}, [&](int rank) -> std::string {
    auto comm = Connect(EnvFor(rank, world, port), {kTestTimeout});
    if (!comm.ok()) return "connect: " + comm.status().message();
    // Both connected before the kill: a rank's Connect can return while the other's is still
    // completing the mesh, and a kill then fails that Connect instead of the collective below.
    auto ready = (*comm)->AllGather("ready", "connecting");
    if (!ready.ok()) return "ready: " + ready.status().message();
    if (rank == 1) raise(SIGKILL);
    auto all = (*comm)->AllGather("x", "gathering statistics");
    return all.ok() ? std::string("unexpectedly OK") : all.status().message();
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(out[1].exit_code, -1);
  EXPECT_NE(out[0].report.find("rank 1 never reached gathering statistics"), std::string::npos)
      << out[0].report << " (rank 0 exit " << out[0].exit_code << ")";
  EXPECT_LT(seconds, kFaultBoundSeconds);
}

// Only rank 0 of 2 starts: the rendezvous ends after the timeout and says who never came.
TEST(GlooCommunicatorTest, IncompleteRendezvousTimesOutNamingTheMissingRank) {
  const int port = FreePort();
  const auto start = std::chrono::steady_clock::now();
  auto out = RunRanks({0}, [&](int rank) -> std::string {
    auto comm = Connect(EnvFor(rank, 2, port), {milliseconds(2000)});
    return comm.ok() ? std::string("unexpectedly OK") : comm.status().message();
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(out[0].report.find("did not complete within 2 s: rank 1 never joined"),
            std::string::npos)
      << out[0].report;
  EXPECT_LT(seconds, kFaultBoundSeconds);
}

// A worker whose rank 0 never starts: it cannot reach the store and says where it looked.
TEST(GlooCommunicatorTest, UnreachableStoreTimesOut) {
  const int port = FreePort();
  auto out = RunRanks({1}, [&](int rank) -> std::string {
    auto comm = Connect(EnvFor(rank, 2, port), {milliseconds(2000)});
    return comm.ok() ? std::string("unexpectedly OK") : comm.status().message();
  });
  EXPECT_NE(
      out[1].report.find("cannot reach the rendezvous store at 127.0.0.1:" + std::to_string(port)),
      std::string::npos)
      << out[1].report;
}

}  // namespace
}  // namespace quantkit::distributed
