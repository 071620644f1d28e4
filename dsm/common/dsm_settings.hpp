#pragma once
// The substrate's settings (dsm/): launcher, bootstrap, fabric, memory, service, logging.
// docs/environment.md documents each; `loom-info` prints them.
#include "loom/dsm/common/settings_check.hpp"

namespace loom::settings::dsm {

using T = Type;

// Set by loomrun (a program reads them through the bootstrap).
inline constexpr Setting kRank{"LOOM_RANK", T::Int, "0", "0..32766", "this process's rank"};
inline constexpr Setting kSize{"LOOM_SIZE", T::Int, "1", "1..32767", "the number of processes"};
inline constexpr Setting kLocalRank{"LOOM_LOCAL_RANK", T::Int, "", "0..32766", "rank on this host (default: LOOM_RANK)"};
inline constexpr Setting kLocalSize{"LOOM_LOCAL_SIZE", T::Int, "", "1..32767", "processes on this host (default: LOOM_SIZE)"};
inline constexpr Setting kJobId{"LOOM_JOB_ID", T::String, "", "", "the job's identity"};
inline constexpr Setting kJobDir{"LOOM_JOB_DIR", T::String, "", "", "the job's shared-memory directory"};
inline constexpr Setting kNode{"LOOM_NODE", T::Int, "0", "0..4095", "this node's index in a job over several nodes"};
inline constexpr Setting kNodes{"LOOM_NODES", T::Int, "1", "1..4096", "the number of nodes in the job"};
inline constexpr Setting kBootFd{"LOOM_BOOT_FD", T::Int, "-1", "-1..65535",
                                 "the node leader's link to its launcher (jobs over several nodes)"};
inline constexpr Setting kThreads{"LOOM_THREADS", T::Int, "1", "1..1024", "worker threads per process (loomrun --threads)"};
inline constexpr Setting kProvider{"LOOM_PROVIDER", T::Choice, "auto", "auto|shm|verbs",
                                   "fabric provider (loomrun --provider): auto = shm within a host, verbs between hosts"};

// Tuning and behaviour.
inline constexpr Setting kShmDir{"LOOM_SHM_DIR", T::String, "/dev/shm", "", "where loomrun creates job directories"};
inline constexpr Setting kSweep{"LOOM_SWEEP", T::Bool, "1", "", "remove job directories no live process holds"};
inline constexpr Setting kStoppedLimit{"LOOM_STOPPED_LIMIT_MS", T::Int, "3000", "0..86400000",
                                       "a rank stopped this long ends the job (loomrun; under PMIx the waits on its host); 0 = never"};
inline constexpr Setting kLog{"LOOM_LOG", T::Choice, "warn", "error|warn|info|debug", "log level"};
inline constexpr Setting kPin{"LOOM_PIN", T::Choice, "auto", "on|off|auto", "pin threads to cores with hwloc"};
inline constexpr Setting kMapBy{"LOOM_MAP_BY", T::Choice, "core", "core|zone|spread",
                                "where a process's threads and memory go (loomrun --map-by): the host's cores in order, a "
                                "NUMA zone per process, or each process's threads over every zone"};
inline constexpr Setting kHugePages{"LOOM_HUGE_PAGES", T::Bool, "1", "", "use a hugetlbfs mount with free pages"};
inline constexpr Setting kSuperchunk{"LOOM_SUPERCHUNK_SIZE", T::Size, "1G", "2M..64G",
                                     "size of each registered mapping an RDMAAllocator takes (a multiple of 2M)"};
inline constexpr Setting kHeapFit{"LOOM_HEAP_FIT", T::Choice, "best", "first|next|best|worst",
                                  "placement policy of the remote-allocation heap"};
inline constexpr Setting kServiceBuffers{"LOOM_SERVICE_BUFFERS", T::Int, "32", "1..4096", "receive buffers per peer for service calls"};
inline constexpr Setting kServiceMessage{"LOOM_SERVICE_MESSAGE", T::Size, "4096", "256..1M",
                                         "largest service message, header (24 B) included"};
inline constexpr Setting kShmRnrTimeout{"LOOM_SHM_RNR_TIMEOUT_MS", T::Int, "0", "0..3600000",
                                        "how long a SEND waits for a receive; 0 = until the peer dies"};
inline constexpr Setting kWire{"LOOM_WIRE", T::String, "", "",
                               "an emulated interconnect between emulated nodes (shm): ib-edr, roce-25g, tcp-10g, or LATENCY_US,GBPS[,MMSGS]"};
inline constexpr Setting kEmulateNodes{"LOOM_EMULATE_NODES", T::Int, "", "1..32767",
                                       "emulated nodes the ranks are split over under LOOM_WIRE (loomrun --emulate-nodes; default: one a rank)"};
inline constexpr Setting kBootstrap{"LOOM_BOOTSTRAP", T::Choice, "auto", "auto|embedded|rendezvous|pmix", "how processes find each other"};
inline constexpr Setting kRsh{"LOOM_RSH", T::String, "ssh", "", "the remote shell loomrun --hosts starts other nodes with"};
inline constexpr Setting kRendezvousAddr{"LOOM_RENDEZVOUS_ADDR", T::String, "", "",
                                         "the address loomrun --hosts tells the other nodes to reach it at"};
inline constexpr Setting kRendezvousTimeout{"LOOM_RENDEZVOUS_TIMEOUT_MS", T::Int, "60000", "100..86400000",
                                            "how long the nodes of a job wait for each other to arrive"};
inline constexpr Setting kHeartbeat{"LOOM_HEARTBEAT_MS", T::Int, "500", "10..60000",
                                    "how often the launchers of a job over several nodes tell each other they are there"};
inline constexpr Setting kNodeTimeout{"LOOM_NODE_TIMEOUT_MS", T::Int, "5000", "20..3600000",
                                      "a node not heard from this long is lost, and the job ends (at least twice LOOM_HEARTBEAT_MS)"};
inline constexpr Setting kVerbsDevice{"LOOM_VERBS_DEVICE", T::String, "", "", "RDMA device (default: the first with an active port)"};
inline constexpr Setting kVerbsPort{"LOOM_VERBS_PORT", T::Int, "0", "0..255", "port on that device; 0 = the first active"};
inline constexpr Setting kVerbsGidIndex{"LOOM_VERBS_GID_INDEX", T::Int, "-1", "-1..65535",
                                        "GID table index; -1 = the first RoCE v2 GID, else 0"};
inline constexpr Setting kVerbsTimeout{"LOOM_VERBS_TIMEOUT", T::Int, "14", "1..31",
                                      "RC ACK timeout exponent: a request unanswered for 4.096 us x 2^N is sent again"};
inline constexpr Setting kVerbsRetry{"LOOM_VERBS_RETRY", T::Int, "7", "0..7",
                                    "times an unanswered request is sent again before it fails (peer unreachable)"};
inline constexpr Setting kVerbsGrh{"LOOM_VERBS_GRH", T::Bool, "0", "", "always send a GRH (InfiniBand across subnets)"};

inline constexpr Setting kCheck{"LOOM_CHECK", T::Choice, "auto", "auto|on|off",
                                "compare every collective call across processes at once; auto: on in a Debug build of Loom"};
inline constexpr Setting kStallReport{"LOOM_STALL_REPORT_MS", T::Int, "5000", "0..86400000",
                                      "a wait that makes no progress this long says what it waits for; 0: never"};

inline constexpr Setting kOffload{"LOOM_OFFLOAD", T::Choice, "direct", "direct|static|dynamic",
                                  "who posts the meshes' requests: each thread (direct), or an executor thread that spins (static) "
                                  "or sleeps when idle (dynamic); docs/offloading.md"};
inline constexpr Setting kOffloadWake{"LOOM_OFFLOAD_WAKE", T::Choice, "futex", "futex|condvar",
                                      "how a requester wakes a sleeping executor or completer (dynamic offloading)"};

inline constexpr Setting kOffloadQueue{"LOOM_OFFLOAD_QUEUE", T::Int, "4096", "64..1048576",
                                       "commands an offloaded Transmitter's queue holds (a power of two; 128 bytes each)"};

inline constexpr Setting kQpsPerPeer{"LOOM_QPS_PER_PEER", T::Int, "1", "1..16",
                                     "queue pairs a mesh keeps to each peer, each with its own completion queue, Transmitter "
                                     "and (offloaded) executor and completer; a thread posts on one, chosen round-robin"};

inline constexpr const Setting* kAll[] = {
    &kRank,      &kSize,      &kLocalRank,  &kLocalSize,     &kJobId,         &kJobDir,        &kNode, &kNodes, &kBootFd, &kThreads,
    &kProvider,  &kShmDir,    &kSweep,      &kLog,           &kPin,  &kMapBy,  &kHugePages,     &kSuperchunk,
    &kHeapFit,   &kServiceBuffers, &kServiceMessage, &kShmRnrTimeout, &kWire, &kEmulateNodes, &kBootstrap, &kRsh, &kRendezvousAddr, &kRendezvousTimeout, &kHeartbeat, &kNodeTimeout, &kVerbsDevice, &kVerbsPort,
    &kVerbsGidIndex, &kVerbsTimeout, &kVerbsRetry, &kVerbsGrh, &kStoppedLimit, &kCheck, &kStallReport, &kOffload, &kOffloadWake, &kOffloadQueue, &kQpsPerPeer};
inline constexpr Table kTable{"dsm", kAll};
inline const bool kRegistered = loom::settings::register_table(kTable);  // for the start-up check

}  // namespace loom::settings::dsm
