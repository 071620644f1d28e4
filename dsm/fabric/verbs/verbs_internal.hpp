#pragma once
// What the verbs provider's files share: the endpoint blob exchanged at connection, and the
// translations between rdma-core's values and the provider contract's.
#include "loom/dsm/fabric/verbs/verbs_provider.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <numa.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <random>

#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"

namespace loom::fabric::verbs {

inline constexpr uint32_t kEndpointMagic = 0x4c4d5645;  // "LMVE"

struct EndpointBlob {
  uint32_t magic;
  int32_t rank;
  uint32_t qp_num;
  uint32_t psn;
  uint16_t lid;
  uint8_t port;
  uint8_t mtu;
  uint8_t gid[16];
};

inline const char* port_state_name(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_ACTIVE: return "active";
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    default: return "other";
  }
}

inline const char* mtu_name(ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256: return "256";
    case IBV_MTU_512: return "512";
    case IBV_MTU_1024: return "1024";
    case IBV_MTU_2048: return "2048";
    case IBV_MTU_4096: return "4096";
  }
  return "?";
}

inline std::string gid_string(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
  return buf;
}

inline bool gid_zero(const ibv_gid& g) {
  for (uint8_t b : g.raw)
    if (b != 0) return false;
  return true;
}

inline Status map_status(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return Status::Success;
    case IBV_WC_LOC_LEN_ERR: return Status::LocalLengthError;
    case IBV_WC_LOC_PROT_ERR: return Status::LocalProtectionError;
    // rxe reports a bad local key and a short receive buffer this way, where mlx5 says
    // protection and length error.
    case IBV_WC_LOC_QP_OP_ERR: return Status::LocalOperationError;
    case IBV_WC_REM_ACCESS_ERR: return Status::RemoteAccessError;
    case IBV_WC_REM_INV_REQ_ERR: return Status::RemoteInvalidRequest;
    case IBV_WC_REM_OP_ERR: return Status::RemoteOperationalError;
    case IBV_WC_RNR_RETRY_EXC_ERR: return Status::ReceiverNotReady;
    case IBV_WC_WR_FLUSH_ERR: return Status::WorkRequestFlushed;
    case IBV_WC_RETRY_EXC_ERR: return Status::PeerUnreachable;
    default: return Status::RemoteOperationalError;
  }
}

inline Opcode map_opcode(ibv_wc_opcode o) {
  switch (o) {
    case IBV_WC_RDMA_WRITE: return Opcode::Write;
    case IBV_WC_RDMA_READ: return Opcode::Read;
    case IBV_WC_COMP_SWAP: return Opcode::CompareSwap;
    case IBV_WC_FETCH_ADD: return Opcode::FetchAdd;
    case IBV_WC_SEND: return Opcode::Send;
    case IBV_WC_RECV: return Opcode::Recv;
    case IBV_WC_RECV_RDMA_WITH_IMM: return Opcode::RecvWriteWithImm;
    default: return Opcode::Write;
  }
}

inline int access_flags(uint32_t a) {
  int f = 0;
  if (a & kLocalWrite) f |= IBV_ACCESS_LOCAL_WRITE;
  if (a & kRemoteWrite) f |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (a & kRemoteRead) f |= IBV_ACCESS_REMOTE_READ;
  if (a & kRemoteAtomic) f |= IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
  return f;
}

}  // namespace loom::fabric::verbs
