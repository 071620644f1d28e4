#pragma once
// The --hosts form: which listed hosts are this one, the address the other nodes reach the
// rendezvous at, and the command line each node's launcher is started with (directly here,
// through the remote shell elsewhere, as mpirun starts its daemons).
#include <string>
#include <vector>

#include "loom/dsm/runtime/launch/options.hpp"

namespace loom::runtime::launch {

// True if `host` names this machine: "localhost", its host name (short or full), or an
// address one of its interfaces has (loopback included).
bool is_this_host(const std::string& host);

// The address the other nodes connect to: LOOM_RENDEZVOUS_ADDR if set; 127.0.0.1 when every
// host is this one; else this host's address on the route to the first other host (found with
// a UDP socket's connect, which sends nothing).
std::string rendezvous_address(const std::vector<HostSlot>& hosts);

// Quotes a word for a POSIX shell (the remote shell runs the command through one).
std::string shell_quote(const std::string& word);

// The argument vector of node k's launcher: this loomrun (same path on every host, as with
// mpirun) in the rendezvous form, with the program and its arguments.
std::vector<std::string> node_command(const Options& o, char** argv, int k, const std::string& addr, int port);

// The command for a remote host: the remote shell's words (--rsh, LOOM_RSH or ssh), the host,
// then one shell command: cd to this directory, the LOOM_* variables (and -x ones), the node's
// launcher.
std::vector<std::string> remote_command(const Options& o, const std::string& host, const std::vector<std::string>& node_argv);

// This loomrun's own path (/proc/self/exe).
std::string self_path();

}  // namespace loom::runtime::launch
