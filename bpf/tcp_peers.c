/* SPDX-License-Identifier: GPL-2.0 */
/*
 * edgeft TCP to fabric peers: one sock_ops program (docs/tcp.md), built once
 * with clang like the tc programs and loaded by the agent with libbpf, which
 * attaches it to a cgroup (the whole host: the cgroup2 root) while it runs.
 *
 * For a TCP connection of a process in that cgroup whose remote address is a
 * peer's (edgeft_peers_v1, the host's pinned peer table):
 *  - the minimum RTO and the delayed-ACK maximum become the agent's
 *    (TCP_BPF_RTO_MIN, TCP_BPF_DELACK_MAX): on the connecting side before its
 *    SYN leaves, so the first RTT sample already uses them; on the accepting
 *    side once established, from where the RTO converges to the new minimum
 *    in a few round trips (the kernel decays the RTT variance a quarter of
 *    the excess per round). Inside
 *    a fabric the RTT is tens of microseconds, and the kernel's 200 ms floor,
 *    not the failover, is what a connection that lost a segment waits for;
 *  - every retransmission and RTO of it is reported to the agent (ring
 *    buffer edgeft_tcpev, at most one record per peer per signal_hold_ns),
 *    which confirms that peer's paths at once instead of at its next probe.
 * Every other socket is left as the kernel made it. The program never fails
 * a socket operation: it returns 1 whatever happens, and a setting the kernel
 * refuses is counted (edgeft_tcpctr: TUNE_FAILED, LAST_ERROR) and reported by
 * the agent. It loads with CAP_BPF and CAP_NET_ADMIN alone (the agent's unit):
 * no pointer arithmetic the verifier refuses without CAP_PERFMON.
 */
#include "edgeft_maps.h"

#include <linux/socket.h>

char _license[] SEC("license") = "GPL";

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif
#ifndef SOL_TCP
#define SOL_TCP 6
#endif

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct edgeft_tcp_config);
	__uint(max_entries, 1);
} edgeft_tcpcfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, EDGEFT_TCP_COUNTERS);
} edgeft_tcpctr SEC(".maps");

/* Last record per peer (bpf_ktime_get_ns), for signal_hold_ns. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, EDGEFT_MAX_PEERS);
} edgeft_tcplast SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} edgeft_tcpev SEC(".maps");

/* Add to one counter (EDGEFT_TCP_CTR_*): the slot is a scalar key, never pointer arithmetic. */
static __always_inline void edgeft_tcp_count(__u32 which, __u64 add)
{
	__u64 *c = bpf_map_lookup_elem(&edgeft_tcpctr, &which);

	if (c)
		*c += add;
}

/* One 32-bit load of a context field at its own offset. */
#define EDGEFT_CTX_LOAD(field) (*(volatile __u32 *)&(field))

/* The peer owning the connection's remote address, or NULL. */
static __always_inline struct edgeft_peer_ref *edgeft_tcp_peer(struct bpf_sock_ops *skops)
{
	struct edgeft_addr key = {};

	if (skops->family == AF_INET) {
		key.w[2] = bpf_htonl(0xffff);
		key.w[3] = skops->remote_ip4;
	} else if (skops->family == AF_INET6) {
		/* An IPv4 peer on a dual-stack socket is ::ffff:a.b.c.d, the table's own form.
		 * Each word read on its own: the verifier refuses a context load through a
		 * pointer the compiler moved (r1 = ctx + 44; *r1). */
		key.w[0] = EDGEFT_CTX_LOAD(skops->remote_ip6[0]);
		key.w[1] = EDGEFT_CTX_LOAD(skops->remote_ip6[1]);
		key.w[2] = EDGEFT_CTX_LOAD(skops->remote_ip6[2]);
		key.w[3] = EDGEFT_CTX_LOAD(skops->remote_ip6[3]);
	} else {
		return 0;
	}
	return bpf_map_lookup_elem(&edgeft_peers_v1, &key);
}

static __always_inline void edgeft_tcp_tune(struct bpf_sock_ops *skops, struct edgeft_tcp_config *cfg)
{
	int rc = 0;
	int val;

	if (cfg->rto_min_us) {
		val = cfg->rto_min_us;
		rc = bpf_setsockopt(skops, SOL_TCP, TCP_BPF_RTO_MIN, &val, sizeof(val));
	}
	if (!rc && cfg->delack_max_us) {
		val = cfg->delack_max_us;
		rc = bpf_setsockopt(skops, SOL_TCP, TCP_BPF_DELACK_MAX, &val, sizeof(val));
	}
	if (rc) {
		__u32 key = EDGEFT_TCP_CTR_LAST_ERROR;
		__u64 *last = bpf_map_lookup_elem(&edgeft_tcpctr, &key);

		edgeft_tcp_count(EDGEFT_TCP_CTR_TUNE_FAILED, 1);
		if (last)
			*last = (__u64)(__s64)rc;
	} else if (cfg->rto_min_us || cfg->delack_max_us) {
		edgeft_tcp_count(EDGEFT_TCP_CTR_TUNED, 1);
	}
	if (cfg->signal_hold_ns)
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_RTO_CB_FLAG |
							 BPF_SOCK_OPS_RETRANS_CB_FLAG);
}

static __always_inline void edgeft_tcp_signal(struct edgeft_peer_ref *ref, __u8 kind, struct edgeft_tcp_config *cfg)
{
	__u32 peer = ref->peer_id;
	__u64 now = bpf_ktime_get_ns();
	__u64 *last = bpf_map_lookup_elem(&edgeft_tcplast, &peer);
	struct edgeft_tcp_event *ev;

	if (!last || !cfg->signal_hold_ns || now - *last < cfg->signal_hold_ns)
		return;
	*last = now; /* a race between CPUs costs one record more, never one less */
	ev = bpf_ringbuf_reserve(&edgeft_tcpev, sizeof(*ev), 0);
	if (!ev) {
		edgeft_tcp_count(EDGEFT_TCP_CTR_EVENTS_LOST, 1);
		return;
	}
	ev->peer_id = peer;
	ev->plane = ref->plane;
	ev->kind = kind;
	ev->pad[0] = 0;
	ev->pad[1] = 0;
	ev->ns = now;
	bpf_ringbuf_submit(ev, 0);
	edgeft_tcp_count(EDGEFT_TCP_CTR_EVENTS, 1);
}

SEC("sockops")
int edgeft_tcp(struct bpf_sock_ops *skops)
{
	__u32 zero = 0;
	struct edgeft_tcp_config *cfg = bpf_map_lookup_elem(&edgeft_tcpcfg, &zero);
	struct edgeft_peer_ref *ref;
	__u32 op = skops->op;

	if (!cfg)
		return 1;
	if (op != BPF_SOCK_OPS_TCP_CONNECT_CB && op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB &&
	    op != BPF_SOCK_OPS_RTO_CB && op != BPF_SOCK_OPS_RETRANS_CB)
		return 1;
	ref = edgeft_tcp_peer(skops);
	if (!ref)
		return 1;
	switch (op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		edgeft_tcp_tune(skops, cfg);
		break;
	case BPF_SOCK_OPS_RTO_CB:
		edgeft_tcp_count(EDGEFT_TCP_CTR_RTO, 1);
		edgeft_tcp_signal(ref, EDGEFT_TCP_RTO, cfg);
		break;
	case BPF_SOCK_OPS_RETRANS_CB:
		edgeft_tcp_count(EDGEFT_TCP_CTR_RETRANS, 1);
		edgeft_tcp_signal(ref, EDGEFT_TCP_RETRANS, cfg);
		break;
	}
	return 1;
}
