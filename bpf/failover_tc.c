/* SPDX-License-Identifier: GPL-2.0 */
/*
 * edgeft L2 failover: tc clsact direct-action programs for ONE plane NIC.
 * Build once per plane with -DEDGEFT_PLANE=<index> (datapath/build.py).
 *
 *   edgeft_egress : note when we last sent to a known peer; steer its packets
 *                   off this plane when this plane is unusable towards it
 *                   (bpf_redirect_neigh; onto an L2 plane with the IP header
 *                   untouched, onto a routed plane translated to failover
 *                   addresses); everything else passes.
 *   edgeft_ingress: translate a peer's packets to our failover addresses back
 *                   (routed planes); record last-seen/counters for known
 *                   peers, learn the peer's plane choice from steered traffic
 *                   and forget it when the peer sends on its own plane again;
 *                   answer the agent probes and plane checks of known peers
 *                   (the reflector).
 *
 * Both return TC_ACT_UNSPEC for anything they do not act on (other tc programs
 * still run) and never drop a packet or modify one, except probe requests and
 * checks, which ingress turns into replies and sends back, and translated
 * packets (docs/datapath.md, docs/agent.md).
 */
#include "edgeft_maps.h"
#include "edgeft_parse.h"

#ifndef BPF_TABLE
/* bpf_redirect_neigh and the tc helpers are GPL-only. */
char _license[] SEC("license") = "GPL";
#endif

#ifdef BPF_TABLE
/* EDGEFT_LOOKUP under bcc (edgeft_compat.h): bcc rewrites map.lookup() only
 * in the main file, outside macros. */
static __always_inline struct edgeft_peer_ref *edgeft_peers_v1_find(struct edgeft_addr *key)
{
	return edgeft_peers_v1.lookup(key);
}
static __always_inline struct edgeft_peer_state *edgeft_state_v1_find(__u32 *key)
{
	return edgeft_state_v1.lookup(key);
}
static __always_inline __u64 *edgeft_seen_v1_find(__u32 *key)
{
	return edgeft_seen_v1.lookup(key);
}
static __always_inline __u64 *edgeft_sent_v1_find(__u32 *key)
{
	return edgeft_sent_v1.lookup(key);
}
static __always_inline struct edgeft_plane *edgeft_plane_v1_find(__u32 *key)
{
	return edgeft_plane_v1.lookup(key);
}
static __always_inline struct edgeft_counters *edgeft_ctrs_v1_find(__u32 *key)
{
	return edgeft_ctrs_v1.lookup(key);
}
static __always_inline struct edgeft_addr *edgeft_fo_v1_find(struct edgeft_fo_key *key)
{
	return edgeft_fo_v1.lookup(key);
}
static __always_inline struct edgeft_xlat *edgeft_xlat_v1_find(struct edgeft_addr *key)
{
	return edgeft_xlat_v1.lookup(key);
}
static __always_inline struct edgeft_xlat_counters *edgeft_xctr_v1_find(__u32 *key)
{
	return edgeft_xctr_v1.lookup(key);
}
#endif /* BPF_TABLE */

/* Tell the agent that traffic with a peer resumed (edgeft_wake_v1). */
static __always_inline void edgeft_wake(__u32 id, __u8 dir)
{
	struct edgeft_wake w = { .peer_id = id, .plane = EDGEFT_PLANE, .dir = dir };

#ifdef BPF_TABLE
	edgeft_wake_v1.ringbuf_output(&w, sizeof(w), 0);
#else
	bpf_ringbuf_output(&edgeft_wake_v1, &w, sizeof(w), 0);
#endif
}

/* Stamp a peer's slot of edgeft_seen_v1 or edgeft_sent_v1 (at most every
 * EDGEFT_SEEN_RES_NS) and wake the agent when the slot was idle. */
static __always_inline void edgeft_stamp(__u64 *slot, __u64 now, __u32 id, __u8 dir)
{
	__u64 last;

	if (!slot)
		return;
	last = *slot;
	if (now - last < EDGEFT_SEEN_RES_NS)
		return;
	*slot = now; /* a race between CPUs costs one record more, never one less */
	if (now - last >= EDGEFT_WAKE_IDLE_NS)
		edgeft_wake(id, dir);
}

#ifndef EDGEFT_PLANE
#error "define EDGEFT_PLANE, the plane index of the NIC this build attaches to"
#endif
#if EDGEFT_MAX_PLANES < 1 || EDGEFT_MAX_PLANES > EDGEFT_PLANE_SLOTS
#error "EDGEFT_MAX_PLANES must be 1..EDGEFT_PLANE_SLOTS"
#endif
#if EDGEFT_PLANE < 0 || EDGEFT_PLANE >= EDGEFT_MAX_PLANES
#error "EDGEFT_PLANE must be below EDGEFT_MAX_PLANES"
#endif
/* Masking an index with SLOTS-1 keeps the verifier sure of array bounds. */
_Static_assert((EDGEFT_PLANE_SLOTS & (EDGEFT_PLANE_SLOTS - 1)) == 0,
	       "EDGEFT_PLANE_SLOTS must be a power of two");

/* bcc 0.26's helpers.h declares the pre-release 3-argument prototype; the
 * kernel helper takes (ifindex, params, plen, flags). */
static long (*edgeft_redirect_neigh)(__u32 ifindex, struct bpf_redir_neigh *params,
				     int plen, __u64 flags) = (void *)BPF_FUNC_redirect_neigh;

/* ---- probes (edgeft_maps.h: answered here, never steered, never learned) */

#define EDGEFT_PACKET_HOST 0

struct edgeft_udp_probe {
	__u16 sport;
	__u16 dport;
	__u16 len;
	__u16 check;
	struct edgeft_probe probe;
};

/* Offset of the UDP header when the packet could be a probe, else 0. Probes
 * carry no IP options, fragments or extension headers, so the offset is fixed. */
static __always_inline __u32 edgeft_probe_l4(struct __sk_buff *skb, __u32 family)
{
	__u8 proto = 0;

	if (family == EDGEFT_AF_INET) {
		__u8 ver_ihl = 0;
		__u16 frag = 0;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ver_ihl, 1) < 0 || ver_ihl != 0x45)
			return 0;
		if (bpf_skb_load_bytes(skb, ETH_HLEN + 6, &frag, 2) < 0 || (frag & bpf_htons(0x3fff)))
			return 0;
		if (bpf_skb_load_bytes(skb, ETH_HLEN + 9, &proto, 1) < 0 || proto != EDGEFT_IPPROTO_UDP)
			return 0;
		return ETH_HLEN + 20;
	}
	if (bpf_skb_load_bytes(skb, ETH_HLEN + 6, &proto, 1) < 0 || proto != EDGEFT_IPPROTO_UDP)
		return 0;
	return ETH_HLEN + 40;
}

/* EDGEFT_PROBE_REQUEST, _REPLY, _CHECK or _CHECK_REPLY (with *l4 set), else 0:
 * not a probe. */
static __always_inline int edgeft_probe_kind(struct __sk_buff *skb, __u32 family, __u32 *l4)
{
	struct edgeft_udp_probe u;

	*l4 = edgeft_probe_l4(skb, family);
	if (!*l4 || bpf_skb_load_bytes(skb, *l4, &u, sizeof(u)) < 0)
		return 0;
	if (u.probe.magic != bpf_htonl(EDGEFT_PROBE_MAGIC) || bpf_ntohs(u.len) < sizeof(u))
		return 0;
	if (u.probe.kind == bpf_htons(EDGEFT_PROBE_REQUEST) && u.dport == bpf_htons(EDGEFT_PROBE_PORT))
		return EDGEFT_PROBE_REQUEST;
	if (u.probe.kind == bpf_htons(EDGEFT_PROBE_REPLY) && u.sport == bpf_htons(EDGEFT_PROBE_PORT))
		return EDGEFT_PROBE_REPLY;
	/* A check is answered on a drained plane too: its reply must be a
	 * CHECK_REPLY, never a REPLY an agent could take for a live plane. */
	if (u.probe.kind == bpf_htons(EDGEFT_PROBE_CHECK) && u.dport == bpf_htons(EDGEFT_PROBE_PORT) &&
	    u.probe.kind_swap == bpf_htons(EDGEFT_PROBE_CHECK_REPLY))
		return EDGEFT_PROBE_CHECK;
	if (u.probe.kind == bpf_htons(EDGEFT_PROBE_CHECK_REPLY) && u.sport == bpf_htons(EDGEFT_PROBE_PORT))
		return EDGEFT_PROBE_CHECK_REPLY;
	return 0;
}

/*
 * Turn a request into its reply in place and send it back out this NIC: swap
 * MACs, addresses, ports and the kind halves. Only 16-bit words move, inside
 * the ranges each checksum covers (the UDP pseudo-header included), so the IP
 * and UDP checksums stay valid for CHECKSUM_NONE/PARTIAL/COMPLETE skbs alike.
 * No neighbour lookup: the reply goes to the MAC the request came from.
 */
static __always_inline int edgeft_reflect(struct __sk_buff *skb, __u32 family, __u32 l4)
{
	/* A store can only fail when unsharing the skb fails (memory): the probe
	 * is then half-swapped and must not reach the stack; it counts as lost. */
	__u8 mac[12], swapped[12];

	if (bpf_skb_load_bytes(skb, 0, mac, sizeof(mac)) < 0)
		return TC_ACT_SHOT;
	__builtin_memcpy(swapped, mac + 6, 6);
	__builtin_memcpy(swapped + 6, mac, 6);
	if (bpf_skb_store_bytes(skb, 0, swapped, sizeof(swapped), 0) < 0)
		return TC_ACT_SHOT;

	if (family == EDGEFT_AF_INET) {
		__u32 a[2], b[2];

		if (bpf_skb_load_bytes(skb, ETH_HLEN + 12, a, sizeof(a)) < 0)
			return TC_ACT_SHOT;
		b[0] = a[1];
		b[1] = a[0];
		if (bpf_skb_store_bytes(skb, ETH_HLEN + 12, b, sizeof(b), 0) < 0)
			return TC_ACT_SHOT;
	} else {
		__u32 a[8], b[8];

		if (bpf_skb_load_bytes(skb, ETH_HLEN + 8, a, sizeof(a)) < 0)
			return TC_ACT_SHOT;
		__builtin_memcpy(b, a + 4, 16);
		__builtin_memcpy(b + 4, a, 16);
		if (bpf_skb_store_bytes(skb, ETH_HLEN + 8, b, sizeof(b), 0) < 0)
			return TC_ACT_SHOT;
	}

	__u16 w[2], s[2];

	/* ports, then kind/kind_swap (UDP offsets 12-15: even, like every move) */
	if (bpf_skb_load_bytes(skb, l4, w, sizeof(w)) < 0)
		return TC_ACT_SHOT;
	s[0] = w[1];
	s[1] = w[0];
	if (bpf_skb_store_bytes(skb, l4, s, sizeof(s), 0) < 0)
		return TC_ACT_SHOT;
	if (bpf_skb_load_bytes(skb, l4 + 12, w, sizeof(w)) < 0)
		return TC_ACT_SHOT;
	s[0] = w[1];
	s[1] = w[0];
	if (bpf_skb_store_bytes(skb, l4 + 12, s, sizeof(s), 0) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect(skb->ifindex, 0);
}

/* For edgeft_xlat.h, which needs the xlat map before this file defines its users. */
static __always_inline struct edgeft_xlat *edgeft_xlat_find(struct edgeft_addr *failover)
{
	return EDGEFT_LOOKUP(edgeft_xlat_v1, failover);
}

#include "edgeft_xlat.h"

/* Up and not drained: the plane may carry (or receive) steered traffic. */
static __always_inline int edgeft_plane_ok(struct edgeft_plane *cfg)
{
	return cfg && cfg->ifindex &&
	       (cfg->flags & (EDGEFT_PLANE_UP | EDGEFT_PLANE_DRAINED)) == EDGEFT_PLANE_UP;
}

/* Only positive evidence moves traffic: a plane nobody configured stays usable. */
static __always_inline int edgeft_plane_bad(struct edgeft_plane *cfg)
{
	if (!cfg || !cfg->ifindex)
		return 0;
	return (cfg->flags & EDGEFT_PLANE_DRAINED) || !(cfg->flags & EDGEFT_PLANE_UP);
}

/* Fill nh with the peer's address on plane t; 0 if it has none there. */
static __always_inline int edgeft_nexthop(struct edgeft_peer_state *st, __u32 t,
					  __u32 family, struct bpf_redir_neigh *nh)
{
	t &= EDGEFT_PLANE_SLOTS - 1;
	if (family == EDGEFT_AF_INET) {
		nh->nh_family = EDGEFT_AF_INET;
		nh->ipv4_nh = st->v4[t];
		return nh->ipv4_nh != 0;
	}
	nh->nh_family = EDGEFT_AF_INET6;
	__builtin_memcpy(nh->ipv6_nh, st->v6[t].w, sizeof(nh->ipv6_nh));
	return (nh->ipv6_nh[0] | nh->ipv6_nh[1] | nh->ipv6_nh[2] | nh->ipv6_nh[3]) != 0;
}

/* Routed target t: the failover addresses on t of the packet's source (ours)
 * and destination (the peer's); 0 when either has none. */
static __always_inline int edgeft_failover_pair(const struct edgeft_pkt *p, __u32 t, struct edgeft_xlat_job *job)
{
	struct edgeft_fo_key key = {};

	key.native = p->src;
	key.plane = t;
	struct edgeft_addr *src = EDGEFT_LOOKUP(edgeft_fo_v1, &key);
	if (!src)
		return 0;
	job->to[0] = *src;
	key.native = p->dst;
	struct edgeft_addr *dst = EDGEFT_LOOKUP(edgeft_fo_v1, &key);
	if (!dst)
		return 0;
	job->to[1] = *dst;
	job->from[0] = p->src;
	job->from[1] = p->dst;
	job->ingress = 0;
	return 1;
}

EDGEFT_PROG int edgeft_egress(struct __sk_buff *skb)
{
	struct edgeft_pkt p = {};

	if (edgeft_parse(skb, &p) < 0 || p.nd)
		return TC_ACT_UNSPEC;

	struct edgeft_peer_ref *ref = EDGEFT_LOOKUP(edgeft_peers_v1, &p.dst);
	if (!ref)
		return TC_ACT_UNSPEC;
	__u32 id = ref->peer_id;
	struct edgeft_peer_state *st = EDGEFT_LOOKUP(edgeft_state_v1, &id);
	if (!st)
		return TC_ACT_UNSPEC;

	__u32 l4;

	if (edgeft_probe_kind(skb, p.family, &l4)) /* probes test this plane */
		return TC_ACT_UNSPEC;

	if (id < EDGEFT_MAX_PEERS) {
		__u64 now = bpf_ktime_get_ns();
		__u32 slot = id * EDGEFT_PLANE_SLOTS + EDGEFT_PLANE;
		edgeft_stamp(EDGEFT_LOOKUP(edgeft_sent_v1, &slot), now, id, EDGEFT_WAKE_TX);
	}

	__u32 me = EDGEFT_PLANE;
	struct edgeft_counters *c = EDGEFT_LOOKUP(edgeft_ctrs_v1, &me);
	struct edgeft_plane *here = EDGEFT_LOOKUP(edgeft_plane_v1, &me);

	struct edgeft_xlat_job job = {};

	/* Steer only off a plane that is bad: multi-rail flows keep their plane. */
	if (!(st->down_mask & (1 << EDGEFT_PLANE)) && !edgeft_plane_bad(here)) {
		/* A routed plane carries a peer's address of another plane only
		 * translated: the kernel routed it here (the agent's backup and held
		 * routes through this plane's gateway, while that plane is down or
		 * its NIC is gone, when no tc hook of its own can see the packet). */
		if (here && (here->flags & EDGEFT_PLANE_ROUTED) && ref->plane != EDGEFT_PLANE &&
		    ref->plane < EDGEFT_MAX_PLANES) {
			struct edgeft_xlat_counters *x = EDGEFT_LOOKUP(edgeft_xctr_v1, &me);

			if (!edgeft_failover_pair(&p, EDGEFT_PLANE, &job)) {
				if (x)
					x->untranslatable++;
			} else {
				if (edgeft_xlat_packet(skb, p.family, &job) < 0)
					return TC_ACT_SHOT; /* half-translated: must not leave */
				if (x)
					x->translated_out++;
			}
		}
		if (c) {
			c->tx_packets++;
			c->tx_bytes += skb->len;
		}
		return TC_ACT_UNSPEC;
	}

	/* Target: the peer's active plane, else the first usable one. */
	struct bpf_redir_neigh nh = {};
	__u32 ifindex = 0, target = 0, routed = 0;

#pragma unroll
	for (int i = 0; i <= EDGEFT_MAX_PLANES; i++) {
		__u32 t = i == 0 ? st->active_plane : i - 1;

		if (t == EDGEFT_PLANE || t >= EDGEFT_MAX_PLANES)
			continue;
		if (st->down_mask & (1 << t))
			continue;
		struct edgeft_plane *cfg = EDGEFT_LOOKUP(edgeft_plane_v1, &t);
		if (!edgeft_plane_ok(cfg))
			continue;
		if (cfg->flags & EDGEFT_PLANE_ROUTED) {
			/* t routes only its own prefixes: the peer is reached at its
			 * failover address there, from ours, next hop by the FIB. */
			if (!edgeft_failover_pair(&p, t, &job)) {
				struct edgeft_xlat_counters *x = EDGEFT_LOOKUP(edgeft_xctr_v1, &me);

				if (x)
					x->untranslatable++;
				continue;
			}
			routed = 1;
		} else if (!edgeft_nexthop(st, t, p.family, &nh)) {
			continue;
		}
		ifindex = cfg->ifindex;
		target = t;
		break;
	}
	if (!ifindex) {
		if (c)
			c->steer_skipped++;
		return TC_ACT_UNSPEC;
	}
	if (routed && edgeft_xlat_packet(skb, p.family, &job) < 0)
		return TC_ACT_SHOT; /* half-translated: must not leave */
	if (c) {
		c->steered_packets++;
		c->steered_bytes += skb->len;
	}
	struct edgeft_counters *in = EDGEFT_LOOKUP(edgeft_ctrs_v1, &target);
	if (in) {
		in->steered_in_packets++;
		in->steered_in_bytes += skb->len;
	}
	if (routed) {
		struct edgeft_xlat_counters *x = EDGEFT_LOOKUP(edgeft_xctr_v1, &target);

		if (x)
			x->translated_out++;
	}
	/* Routed: no next hop given, the FIB finds the plane's gateway for the
	 * failover address. */
	return edgeft_redirect_neigh(ifindex, routed ? (void *)0 : &nh, routed ? 0 : sizeof(nh), 0);
}

/*
 * Ingress of a packet to one of our failover addresses (`mine`): a peer's
 * translated packet is rewritten back to both native addresses (1: carry on
 * with them); an ICMP error from anyone (a router of this plane about a
 * translated packet) gets our native address and its quote translated (0);
 * anything else is native traffic to the failover address, left alone (0).
 * -1: a store failed half-way.
 */
static __always_inline int edgeft_translate_in(struct __sk_buff *skb, struct edgeft_pkt *p, struct edgeft_addr *native)
{
	struct edgeft_xlat_job job = {};
	struct edgeft_xlat *peer = EDGEFT_LOOKUP(edgeft_xlat_v1, &p->src);
	__u32 me = EDGEFT_PLANE;
	struct edgeft_xlat_counters *x = EDGEFT_LOOKUP(edgeft_xctr_v1, &me);

	job.from[0] = p->src;
	job.from[1] = p->dst;
	job.to[0] = p->src;
	job.to[1] = *native;
	job.ingress = 1;
	if (peer && !(peer->flags & EDGEFT_XLAT_LOCAL)) {
		job.to[0] = peer->native;
		if (edgeft_xlat_packet(skb, p->family, &job) < 0)
			return -1;
		p->src = job.to[0];
		p->dst = job.to[1];
		if (x)
			x->translated_in++;
		return 1;
	}

	struct edgeft_l4 l4;

	edgeft_find_l4(skb, p->family, &l4);
	if (!edgeft_icmp_error(skb, p->family, &l4))
		return 0;
	if (edgeft_xlat_packet(skb, p->family, &job) < 0)
		return -1;
	if (x)
		x->icmp_errors_in++;
	return 0;
}

/* Packets of one instant on several CPUs all pass the hold: only the one
 * that moves changed_ns from what it read makes the change (and counts it);
 * the others see it done. */
static __always_inline int edgeft_claim_change(struct edgeft_peer_state *st, __u64 since, __u64 now)
{
	return __sync_val_compare_and_swap(&st->changed_ns, since, now) == since;
}

EDGEFT_PROG int edgeft_ingress(struct __sk_buff *skb)
{
	struct edgeft_pkt p = {};

	if (edgeft_parse(skb, &p) < 0)
		return TC_ACT_UNSPEC;

	struct edgeft_xlat *mine = EDGEFT_LOOKUP(edgeft_xlat_v1, &p.dst);
	if (mine && (mine->flags & EDGEFT_XLAT_LOCAL)) {
		struct edgeft_addr native = mine->native;
		int r = edgeft_translate_in(skb, &p, &native);

		if (r < 0)
			return TC_ACT_SHOT; /* half-translated: must not reach the stack */
		if (r == 0)
			return TC_ACT_UNSPEC;
	}

	struct edgeft_peer_ref *ref = EDGEFT_LOOKUP(edgeft_peers_v1, &p.src);
	if (!ref)
		return TC_ACT_UNSPEC;
	__u32 id = ref->peer_id;
	__u32 native = ref->plane;
	if (id >= EDGEFT_MAX_PEERS)
		return TC_ACT_UNSPEC;
	struct edgeft_peer_state *st = EDGEFT_LOOKUP(edgeft_state_v1, &id);
	if (!st)
		return TC_ACT_UNSPEC;

	/* Probes: answer requests and checks addressed to this host (not frames
	 * a bridge flooded to us); replies go to the agent or the plane_check
	 * module. None is counted or learned. */
	__u32 l4;
	int kind = edgeft_probe_kind(skb, p.family, &l4);

	__u32 me = EDGEFT_PLANE;

	if (kind == EDGEFT_PROBE_REQUEST && skb->pkt_type == EDGEFT_PACKET_HOST) {
		/* A drained plane looks dead to the peers' probes, so their agents
		 * keep off it by their own judgement too (not only by learning). */
		struct edgeft_plane *self = EDGEFT_LOOKUP(edgeft_plane_v1, &me);

		if (self && (self->flags & EDGEFT_PLANE_DRAINED))
			return TC_ACT_UNSPEC;
		return edgeft_reflect(skb, p.family, l4);
	}
	/* Checks are answered whatever the plane's flags: an operator proves a
	 * drained plane works end to end before moving traffic back onto it. */
	if (kind == EDGEFT_PROBE_CHECK && skb->pkt_type == EDGEFT_PACKET_HOST)
		return edgeft_reflect(skb, p.family, l4);
	if (kind)
		return TC_ACT_UNSPEC;
	/* Neighbour discovery is about one link, not traffic: it is not counted,
	 * does not make the peer look active here (the kernel keeps neighbour
	 * entries fresh on a drained plane too) and tells nothing about the
	 * peer's choice of plane, since it is never steered. */
	if (p.nd)
		return TC_ACT_UNSPEC;

	__u64 now = bpf_ktime_get_ns();
	__u32 slot = id * EDGEFT_PLANE_SLOTS + EDGEFT_PLANE;
	edgeft_stamp(EDGEFT_LOOKUP(edgeft_seen_v1, &slot), now, id, EDGEFT_WAKE_RX);

	struct edgeft_counters *c = EDGEFT_LOOKUP(edgeft_ctrs_v1, &me);
	if (c) {
		c->rx_packets++;
		c->rx_bytes += skb->len;
	}

	/* An identity address names no plane. */
	if (native >= EDGEFT_MAX_PLANES || (st->flags & EDGEFT_PEER_NO_LEARN))
		return TC_ACT_UNSPEC;
	__u64 since = st->changed_ns;

	if ((__s64)(now - since) < EDGEFT_LEARN_HOLD_NS)
		return TC_ACT_UNSPEC;

	__u8 here_bit = 1 << EDGEFT_PLANE;

	if (native == EDGEFT_PLANE) {
		/* The peer sends on its own plane again: forget what its steering
		 * taught us. Down bits the control plane set are not ours to clear. */
		if ((st->learned_mask & here_bit) && edgeft_claim_change(st, since, now)) {
			st->down_mask &= ~here_bit;
			st->learned_mask &= ~here_bit;
			/* Nothing left to avoid: report the plane it came back to. */
			if (!st->down_mask)
				st->active_plane = EDGEFT_PLANE;
			if (c)
				c->unlearned++;
		}
		return TC_ACT_UNSPEC;
	}

	/*
	 * The peer's plane-X address arriving on this plane Y != X means the peer
	 * judged X broken and steered to Y: follow at once (one packet, no probe).
	 * Not when X is drained or down here: we already keep off X, and the peer
	 * is only echoing that; learning it would keep us off X after we undrain.
	 */
	struct edgeft_plane *here = EDGEFT_LOOKUP(edgeft_plane_v1, &me);
	if (!edgeft_plane_ok(here))
		return TC_ACT_UNSPEC;
	struct edgeft_plane *left = EDGEFT_LOOKUP(edgeft_plane_v1, &native);
	if (edgeft_plane_bad(left))
		return TC_ACT_UNSPEC;

	__u8 left_bit = 1 << native;
	__u8 down = (st->down_mask | left_bit) & ~here_bit;
	__u8 learned = (st->learned_mask | (left_bit & ~st->down_mask)) & ~here_bit;

	if ((st->active_plane != EDGEFT_PLANE || st->down_mask != down || st->learned_mask != learned) &&
	    edgeft_claim_change(st, since, now)) {
		st->active_plane = EDGEFT_PLANE;
		st->down_mask = down;
		st->learned_mask = learned;
		if (c)
			c->learned++;
	}
	return TC_ACT_UNSPEC;
}
