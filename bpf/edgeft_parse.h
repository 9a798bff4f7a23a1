/* SPDX-License-Identifier: GPL-2.0 */
/*
 * edgeft packet parsing: the wire layouts of the IP headers the data path
 * reads, the protocol numbers it needs, and edgeft_parse(), which reads a
 * frame's addresses into the maps' key form (edgeft_maps.h: IPv4 as
 * ::ffff:a.b.c.d). Shared by failover_tc.c and edgeft_xlat.h; self-contained.
 */
#ifndef EDGEFT_PARSE_H
#define EDGEFT_PARSE_H

#include "edgeft_maps.h"

#define EDGEFT_IPPROTO_ICMP 1
#define EDGEFT_IPPROTO_TCP 6
#define EDGEFT_IPPROTO_UDP 17
#define EDGEFT_IPPROTO_ICMPV6 58
#define EDGEFT_IPV6_HOP 0
#define EDGEFT_IPV6_ROUTING 43
#define EDGEFT_IPV6_FRAGMENT 44
#define EDGEFT_IPV6_DSTOPTS 60

#define EDGEFT_AF_INET 2
#define EDGEFT_AF_INET6 10

/* The IP fields we read, at their wire offsets (no L4: we steer by L3 only). */
struct edgeft_ip4 {
	__u8 ver_ihl;
	__u8 tos;
	__u16 tot_len;
	__u16 id;
	__u16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__u16 check;
	__u32 saddr;
	__u32 daddr;
};

struct edgeft_ip6 {
	__u32 ver_tc_flow;
	__u16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__u32 saddr[4];
	__u32 daddr[4];
};

struct edgeft_pkt {
	struct edgeft_addr src;
	struct edgeft_addr dst;
	__u32 family;
	__u32 nd; /* IPv6 neighbour discovery: about one link, never steered */
};


static __always_inline void edgeft_v4_key(struct edgeft_addr *a, __u32 addr)
{
	a->w[0] = 0;
	a->w[1] = 0;
	a->w[2] = bpf_htonl(0x0000ffff);
	a->w[3] = addr;
}

static __always_inline int edgeft_v4_mapped(const __u32 *w)
{
	return w[0] == 0 && w[1] == 0 && w[2] == bpf_htonl(0x0000ffff);
}

/*
 * 0 for an untagged unicast IPv4/IPv6 frame whose fixed IP header is present;
 * -1 for anything else (passed unmodified by the callers). IPv4 options,
 * fragments and IPv6 extension headers do not move the addresses, so they are
 * handled like any other packet of the flow. bpf_skb_load_bytes copies, so a
 * non-linear skb is never pulled or otherwise touched.
 */
static __always_inline int edgeft_parse(struct __sk_buff *skb, struct edgeft_pkt *p)
{
	__u8 eth[ETH_HLEN];

	if (skb->vlan_present) /* offloaded tag: another L2 segment */
		return -1;
	if (bpf_skb_load_bytes(skb, 0, eth, sizeof(eth)) < 0)
		return -1;
	if (eth[0] & 1) /* Ethernet multicast/broadcast */
		return -1;

	__u16 proto = ((__u16)eth[12] << 8) | eth[13];

	if (proto == ETH_P_IP) {
		struct edgeft_ip4 h;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, &h, sizeof(h)) < 0)
			return -1;
		if ((h.ver_ihl >> 4) != 4 || (h.ver_ihl & 0xf) < 5)
			return -1;
		/* Options must be present too. tot_len is not checked: it is 0 in
		 * BIG TCP GSO packets, which must still be steered. */
		if (skb->len < ETH_HLEN + (h.ver_ihl & 0xf) * 4)
			return -1;
		if ((bpf_ntohl(h.daddr) >> 28) >= 0xe) /* multicast, class E, broadcast */
			return -1;
		edgeft_v4_key(&p->src, h.saddr);
		edgeft_v4_key(&p->dst, h.daddr);
		p->family = EDGEFT_AF_INET;
		return 0;
	}
	if (proto == ETH_P_IPV6) {
		struct edgeft_ip6 h;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, &h, sizeof(h)) < 0)
			return -1;
		if ((bpf_ntohl(h.ver_tc_flow) >> 28) != 6)
			return -1;
		if ((bpf_ntohl(h.daddr[0]) >> 24) == 0xff) /* multicast */
			return -1;
		/* ::ffff:a.b.c.d never appears on the wire; it is our IPv4 key space */
		if (edgeft_v4_mapped(h.saddr) || edgeft_v4_mapped(h.daddr))
			return -1;
		__builtin_memcpy(p->src.w, h.saddr, sizeof(p->src.w));
		__builtin_memcpy(p->dst.w, h.daddr, sizeof(p->dst.w));
		p->family = EDGEFT_AF_INET6;
		/* RS/RA/NS/NA/redirect (RFC 4861: no extension headers before them).
		 * A unicast NS for the peer's plane-X address must leave on X, or X's
		 * neighbour entry (the next hop of later steering) never resolves. */
		if (h.nexthdr == EDGEFT_IPPROTO_ICMPV6) {
			__u8 type = 0;

			if (bpf_skb_load_bytes(skb, ETH_HLEN + sizeof(h), &type, 1) == 0 &&
			    type >= 133 && type <= 137)
				p->nd = 1;
		}
		return 0;
	}
	return -1;
}

#endif /* EDGEFT_PARSE_H */
