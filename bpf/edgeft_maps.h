/* SPDX-License-Identifier: GPL-2.0 */
/*
 * edgeft data path: the ONE definition of every map layout and constant.
 *
 * Python mirrors these in plugins/module_utils/datapath/layout.py; every
 * compile through datapath/build.py appends _Static_assert()s generated from
 * that mirror (sizes, offsets, constants), so the two cannot drift silently.
 *
 * Layout rules:
 *  - Map names carry the layout version (_v1). Change any struct below, a
 *    key/value meaning or a map type => rename every map to _v2, so a pinned
 *    map of an old layout is never reinterpreted (docs/datapath.md).
 *  - Struct layouts do not depend on compile-time defines: per-plane arrays are
 *    always EDGEFT_PLANE_SLOTS wide; EDGEFT_MAX_PLANES only bounds what is used.
 *  - Kernel map names are cut at 15 characters: keep the names that short.
 *  - Every padding byte is an explicit field, so keys built on the stack are
 *    fully initialised and Python sees the same bytes.
 */
#ifndef EDGEFT_MAPS_H
#define EDGEFT_MAPS_H

#include "edgeft_compat.h"

#define EDGEFT_LAYOUT_VERSION 1

/* Planes: struct arrays are sized for 4; a build uses the first MAX_PLANES. */
#define EDGEFT_PLANE_SLOTS 4
#ifndef EDGEFT_MAX_PLANES
#define EDGEFT_MAX_PLANES 2
#endif
#define EDGEFT_PLANE_NONE 255 /* address not native to any plane */

/* Capacity; a pinned map keeps the max_entries it was created with. */
#ifndef EDGEFT_MAX_PEERS
#define EDGEFT_MAX_PEERS 4096
#endif
#ifndef EDGEFT_MAX_ADDRS
#define EDGEFT_MAX_ADDRS 32768
#endif

/* edgeft_plane.flags (local plane state, written by the agent/modules). A
 * configured plane (ifindex != 0) without UP, or DRAINED, is left by known
 * peers' traffic and is never a target; an unconfigured one is left alone. */
#define EDGEFT_PLANE_UP 0x1
#define EDGEFT_PLANE_DRAINED 0x2
/* A routed plane carries only its own prefixes: traffic steered onto it is
 * translated to failover addresses (edgeft_fo_v1, edgeft_xlat.h). */
#define EDGEFT_PLANE_ROUTED 0x4

/* edgeft_peer_state.flags */
#define EDGEFT_PEER_NO_LEARN 0x1 /* ingress never changes this peer's state */

/* Packets change a peer's active_plane/down_mask at most once per hold
 * (from changed_ns): packets the peer sent before it switched, still in
 * flight on the other plane, must not switch us back. */
#ifndef EDGEFT_LEARN_HOLD_NS
#define EDGEFT_LEARN_HOLD_NS 50000000
#endif

/* An address: IPv6 as is, IPv4 as ::ffff:a.b.c.d; network byte order words. */
struct edgeft_addr {
	__u32 w[4];
};

/* edgeft_peers_v1 value: which peer owns the address, and on which plane it
 * is native (EDGEFT_PLANE_NONE for identity/service addresses). */
struct edgeft_peer_ref {
	__u32 peer_id; /* < EDGEFT_MAX_PEERS */
	__u8 plane;
	__u8 pad[3];
};

/* edgeft_state_v1 value (key: __u32 peer id).
 * Egress on plane P to this peer passes unless P is in down_mask (or P is
 * drained/down locally); then it goes to active_plane, else to the first
 * usable plane, with the peer's address there as next hop. */
struct edgeft_peer_state {
	__u32 v4[EDGEFT_PLANE_SLOTS];              /* next hop per plane; 0 = none */
	struct edgeft_addr v6[EDGEFT_PLANE_SLOTS]; /* all-zero = none */
	__u8 active_plane; /* preferred target when traffic must leave its plane */
	__u8 down_mask;    /* bit p: do not send to this peer on plane p */
	__u8 flags;        /* EDGEFT_PEER_* */
	__u8 learned_mask; /* bits of down_mask set by ingress learning (the peer
			    * left p); cleared when the peer sends on p again.
			    * Other down bits are the control plane's judgement. */
	__u8 pad[4];
	__u64 changed_ns;  /* CLOCK_MONOTONIC ns of the last change of active_plane
			    * or down_mask, by a packet or by the control plane */
};

/* edgeft_plane_v1 value (key: __u32 plane index). */
struct edgeft_plane {
	__u32 ifindex; /* this host's NIC of the plane; 0 = not configured */
	__u32 flags;   /* EDGEFT_PLANE_* */
};

/*
 * Routed planes (docs/datapath.md "routed mode"): every host has a failover
 * address per plane and family, standing for its native address on the other
 * plane. Egress steering onto a routed plane t rewrites source and
 * destination to their failover addresses on t (edgeft_fo_v1); the
 * receiver's ingress rewrites them back (edgeft_xlat_v1), only when the
 * destination is one of its own failover addresses.
 */

/* edgeft_fo_v1 key: a native address (ours or a peer's) and the plane whose
 * failover address stands for it. Value: struct edgeft_addr, that address. */
struct edgeft_fo_key {
	struct edgeft_addr native;
	__u32 plane;
};

/* edgeft_xlat_v1 value (key: struct edgeft_addr, a failover address). */
#define EDGEFT_XLAT_LOCAL 0x1 /* the failover address is this host's own */
struct edgeft_xlat {
	struct edgeft_addr native; /* the native address it stands for */
	__u32 flags;               /* EDGEFT_XLAT_* */
};

/* edgeft_ctrs_v1 value (per-CPU, key: __u32 plane of the NIC that counted). */
struct edgeft_counters {
	__u64 tx_packets;         /* egress to known peers, left on this plane */
	__u64 tx_bytes;
	__u64 steered_packets;    /* egress to known peers, redirected off this plane */
	__u64 steered_bytes;
	__u64 steer_skipped;      /* should leave this plane, but no usable target */
	__u64 steered_in_packets; /* redirected onto this plane (counted by the source) */
	__u64 steered_in_bytes;
	__u64 rx_packets;         /* ingress from known peers (not neighbour discovery) */
	__u64 rx_bytes;
	__u64 learned;            /* ingress moved a peer onto this plane */
	__u64 unlearned;          /* the peer came back to this plane: learned bit cleared */
};

/* edgeft_xctr_v1 value (per-CPU, key: __u32 plane of the NIC that counted):
 * the routed-mode translations, apart so edgeft_counters keeps its layout. */
struct edgeft_xlat_counters {
	__u64 translated_out;  /* egress: rewritten to failover addresses, steered here */
	__u64 translated_in;   /* ingress: a peer's packet to our failover address, rewritten back */
	__u64 icmp_errors_in;  /* ingress: ICMP errors to our failover address, rewritten back */
	__u64 untranslatable;  /* should be steered onto a routed plane, no failover address known */
};

/* edgeft_seen_v1: __u64 last rx ns (bpf_ktime_get_ns, CLOCK_MONOTONIC),
 * array key = peer_id * EDGEFT_PLANE_SLOTS + plane. Written at most every
 * EDGEFT_SEEN_RES_NS per slot, so busy peers do not bounce one cache line. */
#ifndef EDGEFT_SEEN_RES_NS
#define EDGEFT_SEEN_RES_NS 100000
#endif

/* edgeft_sent_v1: __u64 last tx ns to a known peer, same key and resolution as
 * edgeft_seen_v1, counted on the NIC where egress saw the packet (its route's
 * plane, before any steering). With last rx it tells the agent which peers are
 * talking, so it probes those every interval and idle ones rarely. */

/* edgeft_wake_v1 (ring buffer) record: a peer's first packet on a plane, either
 * way, after at least EDGEFT_WAKE_IDLE_NS without one there (a slot's first
 * stamp too). The agent, which probes idle peers rarely, starts probing the
 * peer's paths at the full rate on it: traffic that resumes is protected from
 * its first packet, not from the agent's next look at the stamps. A full ring
 * loses records, never packets; the agent's scan of the stamps still sees the
 * traffic. */
#ifndef EDGEFT_WAKE_IDLE_NS
#define EDGEFT_WAKE_IDLE_NS 1000000000
#endif
#define EDGEFT_WAKE_RING_BYTES 65536
#define EDGEFT_WAKE_TX 0 /* egress: this host sent to the peer */
#define EDGEFT_WAKE_RX 1 /* ingress: the peer sent to this host */
struct edgeft_wake {
	__u32 peer_id;
	__u8 plane; /* the NIC's plane that saw the packet */
	__u8 dir;   /* EDGEFT_WAKE_TX or EDGEFT_WAKE_RX */
	__u8 pad[2];
};

/*
 * Probes: the agent's per-plane path checks (docs/agent.md). A probe is UDP
 * to or from EDGEFT_PROBE_PORT, without IP options, fragments or extension
 * headers, whose payload starts with struct edgeft_probe (network order).
 *  - ingress answers a request from a known peer in the kernel: it swaps the
 *    MACs, the addresses, the ports and the two kind halves, and sends the
 *    frame back out the NIC it came in on. Every change is a permutation of
 *    16-bit words inside the checksummed ranges, so every checksum stays
 *    valid (whatever the skb's checksum state) and none is recomputed.
 *  - egress never steers a request or a reply: a probe tests one plane.
 *  - probes are not counted, do not touch last_seen and teach nothing (they
 *    leave on their own plane even while the agent steers the peer off it).
 *  - ingress does not answer REQUESTs arriving on a DRAINED plane, so the
 *    peers' agents judge the plane dead and keep off it themselves.
 * CHECK / CHECK_REPLY are the operator's health check of a plane (module
 * plane_check), e.g. through a switch under maintenance before traffic moves
 * back onto it. They are reflected, passed and ignored exactly like REQUEST /
 * REPLY, except that a CHECK is answered on a DRAINED plane too: the check
 * must see the wire work while every host behind the switch has it drained.
 * A CHECK must carry kind_swap CHECK_REPLY, so that exemption can never make
 * a drained plane emit a REPLY. The agent never sends or accepts CHECKs: its
 * judgement still sees a drained plane as dead.
 * The agent mirrors this in plugins/module_utils/datapath/probe.py (a unit test
 * compiles asserts of the mirror against this header).
 */
#define EDGEFT_PROBE_PORT 7531
#define EDGEFT_PROBE_MAGIC 0x65667470 /* "eftp" */
#define EDGEFT_PROBE_REQUEST 0x7271   /* "rq" */
#define EDGEFT_PROBE_REPLY 0x7270     /* "rp" */
#define EDGEFT_PROBE_CHECK 0x6371       /* "cq" */
#define EDGEFT_PROBE_CHECK_REPLY 0x6370 /* "cp" */

struct edgeft_probe {
	__u32 magic;     /* EDGEFT_PROBE_MAGIC */
	__u16 kind;      /* REQUEST or CHECK in a request, REPLY or CHECK_REPLY in a reply */
	__u16 kind_swap; /* the other one: the reflector swaps the two halves */
	__u32 session;   /* the sender's, opaque to the kernel */
	__u32 seq;
	__u64 sent_ns;
};

/*
 * TCP to fabric peers (tcp_peers.c, docs/tcp.md): a sock_ops program the
 * agent loads and attaches to a cgroup for as long as it runs. For a
 * connection whose remote address is in edgeft_peers_v1 it sets a lower
 * minimum RTO and delayed-ACK maximum, and it reports the connection's
 * retransmissions and RTOs to the agent (a ring buffer), which then confirms
 * the peer's paths at once. Its maps are its own and live with the agent:
 * nothing of it is pinned.
 */
#define EDGEFT_TCP_RTO 1     /* the retransmission timer fired (BPF_SOCK_OPS_RTO_CB) */
#define EDGEFT_TCP_RETRANS 2 /* a segment was retransmitted (BPF_SOCK_OPS_RETRANS_CB) */

/* edgeft_tcpcfg value (array of 1), written by the agent before it attaches. */
struct edgeft_tcp_config {
	__u32 rto_min_us;     /* TCP_BPF_RTO_MIN for peers' connections; 0 = the kernel's */
	__u32 delack_max_us;  /* TCP_BPF_DELACK_MAX; 0 = the kernel's */
	__u64 signal_hold_ns; /* at most one event per peer per hold; 0 = no events */
};

/* edgeft_tcpev ring buffer record. */
struct edgeft_tcp_event {
	__u32 peer_id;
	__u8 plane; /* the remote address's native plane (EDGEFT_PLANE_NONE: none) */
	__u8 kind;  /* EDGEFT_TCP_RTO or EDGEFT_TCP_RETRANS */
	__u8 pad[2];
	__u64 ns;   /* bpf_ktime_get_ns() */
};

/* edgeft_tcpctr: per-CPU __u64 counters, one array slot each (a slot per counter, not a struct:
 * a struct field chosen per branch becomes pointer arithmetic the verifier refuses to a
 * program loaded without CAP_PERFMON, as the agent's unit is). */
#define EDGEFT_TCP_CTR_TUNED 0       /* peers' connections given the settings */
#define EDGEFT_TCP_CTR_TUNE_FAILED 1 /* ... where the kernel refused one */
#define EDGEFT_TCP_CTR_RTO 2         /* RTOs of peers' connections */
#define EDGEFT_TCP_CTR_RETRANS 3     /* retransmitted segments of peers' connections */
#define EDGEFT_TCP_CTR_EVENTS 4      /* records written to edgeft_tcpev */
#define EDGEFT_TCP_CTR_EVENTS_LOST 5 /* records the ring buffer had no room for */
#define EDGEFT_TCP_CTR_LAST_ERROR 6  /* the last failed bpf_setsockopt's return value (__s64) */
#define EDGEFT_TCP_COUNTERS 7

/*
 * Map declarations (only where a toolchain is set up: Python includes
 * nothing). EDGEFT_MAP comes from edgeft_compat.h: a bcc table, or a
 * BTF-defined map for the object build.
 */
#ifdef EDGEFT_MAP
EDGEFT_MAP(HASH, struct edgeft_addr, struct edgeft_peer_ref, edgeft_peers_v1,
	   EDGEFT_MAX_ADDRS);
EDGEFT_MAP(HASH, __u32, struct edgeft_peer_state, edgeft_state_v1,
	   EDGEFT_MAX_PEERS);
EDGEFT_MAP(ARRAY, __u32, __u64, edgeft_seen_v1,
	   EDGEFT_MAX_PEERS * EDGEFT_PLANE_SLOTS);
EDGEFT_MAP(ARRAY, __u32, __u64, edgeft_sent_v1,
	   EDGEFT_MAX_PEERS * EDGEFT_PLANE_SLOTS);
EDGEFT_MAP(ARRAY, __u32, struct edgeft_plane, edgeft_plane_v1,
	   EDGEFT_PLANE_SLOTS);
EDGEFT_MAP(PERCPU_ARRAY, __u32, struct edgeft_counters, edgeft_ctrs_v1,
	   EDGEFT_PLANE_SLOTS);
EDGEFT_MAP(HASH, struct edgeft_fo_key, struct edgeft_addr, edgeft_fo_v1,
	   EDGEFT_MAX_ADDRS);
EDGEFT_MAP(HASH, struct edgeft_addr, struct edgeft_xlat, edgeft_xlat_v1,
	   EDGEFT_MAX_ADDRS);
EDGEFT_MAP(PERCPU_ARRAY, __u32, struct edgeft_xlat_counters, edgeft_xctr_v1,
	   EDGEFT_PLANE_SLOTS);
EDGEFT_RINGBUF(edgeft_wake_v1, EDGEFT_WAKE_RING_BYTES);
#endif /* EDGEFT_MAP */

#endif /* EDGEFT_MAPS_H */
