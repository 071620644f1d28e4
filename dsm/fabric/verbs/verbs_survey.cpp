// What RDMA devices and ports this host has (loom-info, and the provider's choice of device).
#include "loom/dsm/fabric/verbs/verbs_internal.hpp"

namespace loom::fabric::verbs {

std::vector<DeviceReport> survey(std::string* error) {
  std::vector<DeviceReport> out;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    if (error) {
      *error = errno == ENOSYS ? std::string("no RDMA devices: this kernel has no RDMA support (ibv_get_device_list: ") +
                                     std::strerror(errno) + ")"
                               : std::string("ibv_get_device_list failed: ") + std::strerror(errno);
    }
    return out;
  }
  for (int i = 0; i < n; ++i) {
    DeviceReport d;
    d.name = ibv_get_device_name(list[i]);
    ibv_context* c = ibv_open_device(list[i]);
    if (c == nullptr) {
      out.push_back(d);
      continue;
    }
    ibv_device_attr a{};
    if (ibv_query_device(c, &a) == 0) {
      d.max_qp = static_cast<uint32_t>(a.max_qp);
      d.max_qp_wr = static_cast<uint32_t>(a.max_qp_wr);
      d.max_cqe = static_cast<uint32_t>(a.max_cqe);
      d.max_mr = static_cast<uint32_t>(a.max_mr);
      d.max_sge = static_cast<uint32_t>(a.max_sge);
      d.max_mr_size = a.max_mr_size;
      d.atomic_cap = a.atomic_cap == IBV_ATOMIC_NONE ? "none" : a.atomic_cap == IBV_ATOMIC_HCA ? "hca" : "glob";
      for (uint8_t p = 1; p <= a.phys_port_cnt; ++p) {
        ibv_port_attr pa{};
        if (ibv_query_port(c, p, &pa) != 0) continue;
        PortReport r;
        r.device = d.name;
        r.port = p;
        r.active = pa.state == IBV_PORT_ACTIVE;
        r.state = port_state_name(pa.state);
        r.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
        r.lid = pa.lid;
        r.mtu = mtu_name(pa.active_mtu);
        for (int g = 0; g < pa.gid_tbl_len && r.gids.size() < 8; ++g) {
          ibv_gid gid{};
          if (ibv_query_gid(c, p, g, &gid) != 0 || gid_zero(gid)) continue;
          r.gids.push_back(std::to_string(g) + ": " + gid_string(gid));
        }
        d.ports.push_back(r);
      }
    }
    ibv_close_device(c);
    out.push_back(d);
  }
  ibv_free_device_list(list);
  if (out.empty() && error) *error = "no RDMA devices (no NIC driver or rdma_rxe/siw link is loaded)";
  return out;
}

}  // namespace loom::fabric::verbs
