#pragma once
// The SIGSEGV handler that hands faults on region memory to the protocol, and the one address
// space per process it dispatches to. Internal to dsm/region.
namespace loom::region {

class AddressSpace;

// Makes `space` the process's address space and installs the handler; an error if the process
// has one already.
void attach_space(AddressSpace* space);
// Uninstalls the handler (the previous one is restored) and forgets the address space.
void detach_space();

}  // namespace loom::region
