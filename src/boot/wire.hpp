#pragma once
// The boot protocol between clumprun and the ranks it starts.
//
// Transport
//   clumprun creates one AF_UNIX SOCK_STREAM socketpair per rank; the rank
//   inherits its end and finds its number in CLUMP_BOOT_FD. A stream (not
//   SOCK_SEQPACKET) because an allgather result may be many MiB, more than one
//   datagram of a unix socket can hold. Both ends are the same machine and the
//   same build, so integers travel in native byte order.
//
// Framing
//   Every message is a frame: a 16-byte frame_header (magic, type, number of
//   descriptors, payload length) and `length` payload bytes. Descriptors travel
//   as SCM_RIGHTS attached to the first byte of their frame's header, so they
//   always arrive no later than the header that announces them; the reader
//   collects every descriptor it receives into one FIFO and a frame takes its
//   `nfds` from the front. A frame carries at most max_fds_per_frame
//   descriptors (the kernel's SCM_MAX_FD is 253).
//
// Conversation (R = a rank, L = clumprun)
//   R -> L  hello {version, rank, pid} + net_address_slot  + 1 fd: R's shared region
//   ...  L waits until every rank said hello, then to every rank:
//   L -> R  job {version, size, job id, flags, datagram key} + size x u64 tag
//                + size x i32 pid + size x i32 node + size x net_address_slot
//                (version 4: flags and the key of CLUMP_NET_AUTH)
//   L -> R  region_fds {first_rank, count}       + count fds, chunks of <= 250
//                (for a rank on another node, possibly a stand-in such as
//                /dev/null: descriptors cannot cross machines, and a rank
//                never maps another node's region)
//   ...  then, any number of times, in the same order on every rank:
//   R -> L  collective {kind, root, seq, len}    + len bytes (see below)
//   L -> R  collective_done {seq}                + the result (see below)
//   R -> L  getenv "name"          L -> R  getenv_reply {found} + value
//   R -> L  exit {code}            (then R _exits; L ends the job with code)
//   L -> R  end {code}             (another rank called exit: see below)
//   L -> R  refuse "text"          (L is ending the job because of R's request)
//   L -> R  peer_exited {rank, status}  (version 3: rank's process has exited
//                with that wait status; its peers stop waiting for it)
//
// A rank reads what L sends with a thread of its own once it has joined
// (boot/inbox.hpp): `end` and `peer_exited` are acted on at once, whatever
// the program is doing; the answers wait for the thread that asked.
//
// Nodes and network addresses (version 2): every rank hands join() an opaque
// blob of at most max_net_address bytes, its address for the network protocol,
// which boot never interprets. It travels in a fixed net_address_slot (a
// length, then 64 bytes of which the first `length` count, the rest zero), in
// the hello and, for every rank in rank order, in the job message: fixed slots
// make every message's length a function of the job size alone, so each side
// checks one exact length. The job message also says which node each rank is
// on: dense indices 0..node_count-1 (every index names at least one rank), so
// that the am layer can tell shared-memory peers from network peers. Each side
// checks the version before the length, so a peer of another version is told
// so rather than that its message is malformed.
//
// Collectives: every rank sends one `collective` and waits for the answer;
// L answers everybody once all ranks have arrived. L checks that all ranks
// agree on kind, seq, len and root, and ends the job when they do not.
//   barrier:   no data either way.
//   allgather: each rank sends len bytes; each receives size x len, rank order.
//   broadcast: the root sends len bytes, the others none; the non-roots
//              receive len bytes, the root an empty answer.
//
// Ending: when a rank calls exit_job, clumprun sends `end` to every other
// rank and gives them end_grace_ms before SIGTERM. A rank that waits in a
// collective (or is about to) reads `end`, flushes its stdio and exits with
// the code, so the output of an SPMD program whose ranks all call
// AMX_SPMDExit is not lost to a SIGTERM; a rank busy elsewhere gets the signal.
//
// Failure: a rank that sees EOF on the socket knows clumprun is gone and ends
// itself (it must not hang). clumprun treats a rank's EOF as harmless until
// that rank exits; once a rank has exited, nobody may wait for it: a
// rendezvous or collective it has not joined ends the job.

#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

namespace clump::boot::wire {

/// Bumped whenever a message's layout or meaning changes; hello and job carry it
/// so that a program and a clumprun from different builds refuse each other.
inline constexpr uint32_t protocol_version = 4;
/// "CLBT" in memory: catches a desynchronised stream at the next header.
inline constexpr uint32_t frame_magic = 0x54424c43u;
/// Descriptors per frame; SCM_MAX_FD is 253.
inline constexpr int max_fds_per_frame = 250;
/// How long clumprun waits after sending `end` before SIGTERM.
inline constexpr int end_grace_ms = 1000;
/// Largest payload either side accepts (an allgather result of 1 GiB).
inline constexpr uint64_t max_payload = uint64_t{1} << 30;

enum class msg : uint16_t {
  hello = 1,
  job = 2,
  region_fds = 3,
  collective = 4,
  collective_done = 5,
  getenv = 6,
  getenv_reply = 7,
  exit = 8,
  refuse = 9,
  end = 10,  // body: exit_body
  peer_exited = 11,  // body: peer_exited_body
};

enum class collective_kind : uint32_t { barrier = 1, allgather = 2, broadcast = 3 };

inline const char* to_string(collective_kind k) {
  switch (k) {
    case collective_kind::barrier: return "barrier";
    case collective_kind::allgather: return "allgather";
    case collective_kind::broadcast: return "broadcast";
  }
  return "unknown collective";
}

struct frame_header {
  uint32_t magic;
  uint16_t type;    // a msg
  uint16_t nfds;    // descriptors that came with this frame
  uint64_t length;  // payload bytes after the header
};

/// Largest network address a rank may hand to join() (a sockaddr_in6 is 28
/// bytes; the rest is room for a provider's own address format).
inline constexpr size_t max_net_address = 64;

/// Followed by one net_address_slot: this rank's network address.
struct hello_body {
  uint32_t version;
  int32_t rank;
  int32_t pid;
  uint32_t reserved;
};

/// A network address in a fixed-size slot; bytes past `length` are zero.
struct net_address_slot {
  uint32_t length;  // at most max_net_address
  uint32_t reserved;
  std::byte bytes[max_net_address];
};

/// Followed by size x uint64_t tags, size x int32_t pids, size x int32_t
/// nodes and size x net_address_slot, in rank order.
struct job_body {
  uint32_t version;
  int32_t size;
  uint64_t job_id;
  uint32_t flags;  // job_authenticated: every datagram of the job carries a tag keyed by net_key
  uint32_t reserved;
  /// The datagram key (version 4). clumprun leaves it zero in the job
  /// message of a rank on another host; that host's agent fills it in, so
  /// that it never crosses the network.
  uint8_t net_key[32];
};
inline constexpr uint32_t job_authenticated = 1;

struct region_fds_body {
  int32_t first_rank;
  int32_t count;
};

/// Followed by the contribution (see the table at the top).
struct collective_body {
  uint32_t kind;  // a collective_kind
  int32_t root;   // broadcast only; 0 otherwise
  uint64_t seq;   // 0, 1, 2, ... per rank; equal on all ranks for one collective
  uint64_t len;
};

/// Followed by the result.
struct collective_done_body {
  uint64_t seq;
};

struct getenv_reply_body {
  uint32_t found;
  uint32_t reserved;
};

struct peer_exited_body {
  int32_t rank;
  int32_t status;  // the wait status (WIFEXITED, WIFSIGNALED ...)
};

struct exit_body {
  int32_t code;
  uint32_t reserved;
};

static_assert(sizeof(frame_header) == 16 && sizeof(hello_body) == 16 && sizeof(job_body) == 56 &&
              sizeof(collective_body) == 24 && sizeof(net_address_slot) == 8 + max_net_address);

/// The exact length of a version-2 hello.
inline constexpr size_t hello_length = sizeof(hello_body) + sizeof(net_address_slot);

/// The exact length of a version-2 job message for `size` ranks.
inline constexpr size_t job_length(size_t size) {
  return sizeof(job_body) + size * (sizeof(uint64_t) + 2 * sizeof(int32_t) + sizeof(net_address_slot));
}

/// Copies a trivially copyable body out of a payload; false when it is too short.
template <class T>
bool read_body(const void* payload, size_t len, T& out) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (len < sizeof(T)) return false;
  std::memcpy(&out, payload, sizeof(T));
  return true;
}

/// Fills `out` with `address`; false when it is longer than max_net_address.
inline bool to_slot(std::span<const std::byte> address, net_address_slot& out) {
  if (address.size() > max_net_address) return false;
  out = net_address_slot{};
  out.length = static_cast<uint32_t>(address.size());
  if (!address.empty()) std::memcpy(out.bytes, address.data(), address.size());
  return true;
}

/// True when `slot` is well formed: a length within bounds and zeros after it
/// (anything else means the peer wrote some other layout).
inline bool valid_slot(const net_address_slot& slot) {
  if (slot.length > max_net_address || slot.reserved != 0) return false;
  for (size_t i = slot.length; i < max_net_address; ++i)
    if (slot.bytes[i] != std::byte{0}) return false;
  return true;
}

/// A 64-bit value from getrandom(2). Returns false (errno set) when the kernel
/// cannot supply one; never blocks after early boot.
inline bool random_u64(uint64_t& out) {
  for (;;) {
    ssize_t n = ::getrandom(&out, sizeof out, 0);
    if (n == static_cast<ssize_t>(sizeof out)) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

/// A tag for an endpoint: random and never AM_NONE (0) or AM_ALL (1).
inline bool random_tag(uint64_t& out) {
  do {
    if (!random_u64(out)) return false;
  } while (out <= 1);
  return true;
}

}  // namespace clump::boot::wire
