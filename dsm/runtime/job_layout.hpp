#pragma once
// Where every rank of a job runs, as the ranks tell each other at start-up: process id, host
// (its name and boot id: two machines may share a name, a machine's processes share its boot
// id), job directory, and Loom build. From these, the hosts of the job (ranks on one host can
// map each other's memory) and a clear error when the ranks run different builds.
#include <span>
#include <string>
#include <vector>

namespace loom::runtime {

struct RankPlace {
  int pid = 0;
  std::string host;     // host name
  std::string boot_id;  // /proc/sys/kernel/random/boot_id
  std::string job_id;
  std::string job_dir;  // this rank's job directory on its host
  std::string build;    // LOOM_BUILD_ID of the library it runs
};

// This process's place.
RankPlace this_place(const std::string& job_id, const std::string& job_dir);

// Encoding for the bootstrap's allgather; decoding checks every field (`rank` names the sender
// in errors).
std::string encode_place(const RankPlace& p);
RankPlace decode_place(std::span<const std::byte> bytes, int rank);

struct JobLayout {
  std::vector<RankPlace> ranks;
  std::vector<int> host_of;             // per rank: its host's index (hosts sorted by name, boot id)
  std::vector<std::string> host_names;  // per host index
  int hosts() const { return static_cast<int>(host_names.size()); }
  bool same_host(int a, int b) const { return host_of[static_cast<size_t>(a)] == host_of[static_cast<size_t>(b)]; }
};

// The layout from every rank's place; fails naming the ranks if their builds differ.
JobLayout make_layout(std::vector<RankPlace> ranks);

}  // namespace loom::runtime
