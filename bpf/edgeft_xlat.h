/* SPDX-License-Identifier: GPL-2.0 */
/*
 * edgeft routed mode: stateless 1:1 translation between native and failover
 * addresses (maps and semantics: edgeft_maps.h, docs/datapath.md).
 * Needs the packet types of edgeft_parse.h and one function of its includer,
 * edgeft_xlat_find() (a lookup in edgeft_xlat_v1): bcc turns map syntax into
 * map calls in the main source file only.
 *
 * Checksums are updated incrementally, never recomputed, so they stay right
 * whatever the skb's checksum state:
 *  - CHECKSUM_PARTIAL (egress with offload): the L4 field holds the pseudo
 *    header sum; bpf_l4_csum_replace with BPF_F_PSEUDO_HDR updates it as such.
 *  - CHECKSUM_COMPLETE (ingress): skb->csum must follow every byte changed.
 *    The IPv4 header's sum is unchanged (addresses and header checksum move
 *    together) and the L4 field moves by minus the address change, which the
 *    pseudo-header update applies to skb->csum. IPv6 has no header checksum,
 *    so its address bytes are stored with BPF_F_RECOMPUTE_CSUM.
 *  - Changes inside an ICMP error's quoted packet are balanced by the error's
 *    own checksum (data, no pseudo header), so skb->csum does not move.
 * A later fragment carries no L4 header: only its addresses change (the
 * first fragment's L4 checksum covers the whole datagram and is fixed there).
 */
#ifndef EDGEFT_XLAT_H
#define EDGEFT_XLAT_H

#include "edgeft_maps.h"
#include "edgeft_parse.h"

/* The includer's lookup of a failover address in edgeft_xlat_v1 (NULL: none). */
static __always_inline struct edgeft_xlat *edgeft_xlat_find(struct edgeft_addr *failover);

#define EDGEFT_IPV6_EXT_MAX 4 /* extension headers walked before giving up on L4 */
#define EDGEFT_ICMP_HLEN 8    /* type, code, checksum, 4 more; the quote follows */

/* Where the transport header is: off == 0 when there is none we may touch
 * (a later fragment, too many extension headers). */
struct edgeft_l4 {
	__u32 off;
	__u8 proto;
};

static __always_inline int edgeft_v6_ext(__u8 next)
{
	return next == EDGEFT_IPV6_HOP || next == EDGEFT_IPV6_ROUTING || next == EDGEFT_IPV6_DSTOPTS ||
	       next == EDGEFT_IPV6_FRAGMENT;
}

static __always_inline void edgeft_find_l4(struct __sk_buff *skb, __u32 family, struct edgeft_l4 *l4)
{
	l4->off = 0;
	l4->proto = 0;
	if (family == EDGEFT_AF_INET) {
		struct edgeft_ip4 h;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, &h, sizeof(h)) < 0)
			return;
		if (h.frag_off & bpf_htons(0x1fff)) /* a later fragment */
			return;
		l4->proto = h.protocol;
		l4->off = ETH_HLEN + (h.ver_ihl & 0xf) * 4;
		return;
	}

	__u8 next = 0;
	__u32 off = ETH_HLEN + sizeof(struct edgeft_ip6);

	if (bpf_skb_load_bytes(skb, ETH_HLEN + 6, &next, 1) < 0)
		return;
#pragma unroll
	for (int i = 0; i < EDGEFT_IPV6_EXT_MAX; i++) {
		__u8 ext[4];

		if (!edgeft_v6_ext(next))
			break;
		if (bpf_skb_load_bytes(skb, off, ext, sizeof(ext)) < 0)
			return;
		if (next == EDGEFT_IPV6_FRAGMENT) {
			if (((ext[2] << 8) | ext[3]) & 0xfff8) /* a later fragment */
				return;
			off += 8;
		} else {
			off += (ext[1] + 1) * 8;
		}
		next = ext[0];
	}
	if (edgeft_v6_ext(next))
		return;
	l4->proto = next;
	l4->off = off;
}

/* Offset of the checksum within the transport header when it covers the
 * pseudo header (the addresses), else 0: ICMPv4's covers the message only. */
static __always_inline __u32 edgeft_pseudo_csum_at(__u32 family, __u8 proto)
{
	if (proto == EDGEFT_IPPROTO_TCP)
		return 16;
	if (proto == EDGEFT_IPPROTO_UDP)
		return 6;
	if (family == EDGEFT_AF_INET6 && proto == EDGEFT_IPPROTO_ICMPV6)
		return 2;
	return 0;
}

/* An ICMP error quotes the packet that caused it: its addresses must be
 * translated like the error's own, or the sender's stack matches it to no
 * socket (path MTU discovery, unreachables). */
static __always_inline int edgeft_icmp_error(struct __sk_buff *skb, __u32 family, struct edgeft_l4 *l4)
{
	__u8 type = 0;

	if (!l4->off || bpf_skb_load_bytes(skb, l4->off, &type, 1) < 0)
		return 0;
	if (family == EDGEFT_AF_INET)
		return l4->proto == EDGEFT_IPPROTO_ICMP && (type == 3 || type == 11 || type == 12);
	return l4->proto == EDGEFT_IPPROTO_ICMPV6 && type >= 1 && type <= 4;
}

static __always_inline int edgeft_addr_eq(const struct edgeft_addr *a, const struct edgeft_addr *b)
{
	return a->w[0] == b->w[0] && a->w[1] == b->w[1] && a->w[2] == b->w[2] && a->w[3] == b->w[3];
}

/* The source and destination of the IP header at l3, as keys. */
static __always_inline int edgeft_load_pair(struct __sk_buff *skb, __u32 l3, __u32 family,
					    struct edgeft_addr *pair)
{
	if (family == EDGEFT_AF_INET) {
		__u32 a[2];

		if (bpf_skb_load_bytes(skb, l3 + 12, a, sizeof(a)) < 0)
			return -1;
		edgeft_v4_key(&pair[0], a[0]);
		edgeft_v4_key(&pair[1], a[1]);
		return 0;
	}
	if (bpf_skb_load_bytes(skb, l3 + 8, pair, 2 * sizeof(*pair)) < 0)
		return -1;
	return 0;
}

/*
 * The translation of one packet: `from` = (src, dst) as found, `to` = what
 * they become. Quoted addresses are translated with the same 1:1 mapping
 * (on egress) or through edgeft_xlat_v1 (on ingress, where a router's error
 * quotes only failover addresses).
 */
struct edgeft_xlat_job {
	struct edgeft_addr from[2];
	struct edgeft_addr to[2];
	int ingress;
};

/* Egress: the packet's own mapping. (Ingress looks each quoted address up in
 * edgeft_xlat_v1, with edgeft_xlat_find.) */
static __always_inline void edgeft_map_quoted(const struct edgeft_xlat_job *job, struct edgeft_addr *a)
{
	if (edgeft_addr_eq(a, &job->from[0]))
		*a = job->to[0];
	else if (edgeft_addr_eq(a, &job->from[1]))
		*a = job->to[1];
}

/* IPv4 header at l3: addresses from -> to, header checksum at l3+10, and
 * the 16-bit field at csum_at (0: none) as a checksum over them. `pseudo`:
 * csum_at is the packet's own transport checksum (skb checksum state
 * applies); else it is quoted data, adjusted as a plain number. */
static __always_inline int edgeft_write4(struct __sk_buff *skb, __u32 l3, const struct edgeft_addr *from,
					 const struct edgeft_addr *to, __u32 csum_at, __u8 proto, int pseudo)
{
	__u32 old[2] = {from[0].w[3], from[1].w[3]};
	__u32 new[2] = {to[0].w[3], to[1].w[3]};
	__u16 check = 1;

	/* A UDP checksum of 0 is "none" and stays 0 (quoted: checked here; the
	 * packet's own: BPF_F_MARK_MANGLED_0 does it, and keeps a real 0 as 0xffff). */
	if (csum_at && !pseudo && proto == EDGEFT_IPPROTO_UDP && bpf_skb_load_bytes(skb, csum_at, &check, 2) < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, l3 + 12, new, sizeof(new), 0) < 0)
		return -1;
#pragma unroll
	for (int i = 0; i < 2; i++) {
		if (old[i] == new[i])
			continue;
		if (bpf_l3_csum_replace(skb, l3 + 10, old[i], new[i], 4) < 0)
			return -1;
		if (!csum_at || !check)
			continue;
		if (pseudo) {
			__u64 flags = BPF_F_PSEUDO_HDR | 4;

			if (proto == EDGEFT_IPPROTO_UDP)
				flags |= BPF_F_MARK_MANGLED_0;
			if (bpf_l4_csum_replace(skb, csum_at, old[i], new[i], flags) < 0)
				return -1;
		} else if (bpf_l3_csum_replace(skb, csum_at, old[i], new[i], 4) < 0) {
			return -1;
		}
	}
	return 0;
}

/* IPv6 header at l3: as edgeft_write4 (no header checksum). Returns the
 * checksum difference of the 32 address bytes (for a quoted header the
 * error's checksum must absorb it), negative on failure. */
static __always_inline __s64 edgeft_write6(struct __sk_buff *skb, __u32 l3, const struct edgeft_addr *from,
					   const struct edgeft_addr *to, __u32 csum_at, __u8 proto, int pseudo)
{
	__u16 check = 1;

	if (csum_at && !pseudo && proto == EDGEFT_IPPROTO_UDP && bpf_skb_load_bytes(skb, csum_at, &check, 2) < 0)
		return -1;
	__s64 diff = bpf_csum_diff((__be32 *)from, 2 * sizeof(*from), (__be32 *)to, 2 * sizeof(*to), 0);

	if (diff < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, l3 + 8, (void *)to, 2 * sizeof(*to), pseudo ? BPF_F_RECOMPUTE_CSUM : 0) < 0)
		return -1;
	if (csum_at && check) {
		if (pseudo) {
			__u64 flags = BPF_F_PSEUDO_HDR;

			if (proto == EDGEFT_IPPROTO_UDP)
				flags |= BPF_F_MARK_MANGLED_0;
			if (bpf_l4_csum_replace(skb, csum_at, 0, diff, flags) < 0)
				return -1;
		} else if (bpf_l3_csum_replace(skb, csum_at, 0, diff, 0) < 0) {
			return -1;
		}
	}
	return diff;
}

/*
 * The packet quoted by the ICMP error whose header is at icmp: translate its
 * addresses and its transport checksum (when quoted), and balance the
 * error's checksum at icmp+2 for every quoted byte that changed. A quote too
 * short for a field leaves that field alone, as the kernel's NAT does.
 */
static __always_inline int edgeft_xlat_quote(struct __sk_buff *skb, __u32 family, __u32 icmp,
					     const struct edgeft_xlat_job *job)
{
	__u32 l3 = icmp + EDGEFT_ICMP_HLEN;
	struct edgeft_addr from[2], to[2];
	__u32 l4 = 0;
	__u8 proto = 0;

	if (edgeft_load_pair(skb, l3, family, from) < 0)
		return 0; /* nothing quoted we can read: leave the quote */
	if (family == EDGEFT_AF_INET) {
		__u8 ver_ihl = 0;

		if (bpf_skb_load_bytes(skb, l3, &ver_ihl, 1) < 0 || bpf_skb_load_bytes(skb, l3 + 9, &proto, 1) < 0)
			return 0;
		l4 = l3 + (ver_ihl & 0xf) * 4;
	} else {
		if (bpf_skb_load_bytes(skb, l3 + 6, &proto, 1) < 0)
			return 0;
		l4 = l3 + sizeof(struct edgeft_ip6); /* no extension headers walked in quotes */
	}
	to[0] = from[0];
	to[1] = from[1];
	if (job->ingress) {
		struct edgeft_xlat *x = edgeft_xlat_find(&from[0]);

		if (x)
			to[0] = x->native;
		x = edgeft_xlat_find(&from[1]);
		if (x)
			to[1] = x->native;
	} else {
		edgeft_map_quoted(job, &to[0]);
		edgeft_map_quoted(job, &to[1]);
	}
	if (edgeft_addr_eq(&to[0], &from[0]) && edgeft_addr_eq(&to[1], &from[1]))
		return 0;

	__u32 csum_at = edgeft_pseudo_csum_at(family, proto);
	__u16 before = 0, after = 0;

	if (csum_at) {
		csum_at += l4;
		if (bpf_skb_load_bytes(skb, csum_at, &before, 2) < 0)
			csum_at = 0; /* not quoted */
	}
	if (family == EDGEFT_AF_INET) {
		/* The quoted IPv4 header's sum does not move: only its transport
		 * checksum's change reaches the error's checksum. */
		if (edgeft_write4(skb, l3, from, to, csum_at, proto, 0) < 0)
			return -1;
	} else {
		__s64 diff = edgeft_write6(skb, l3, from, to, csum_at, proto, 0);

		if (diff < 0 || bpf_l4_csum_replace(skb, icmp + 2, 0, diff, 0) < 0)
			return -1;
	}
	if (csum_at) {
		if (bpf_skb_load_bytes(skb, csum_at, &after, 2) < 0)
			return -1;
		if (after != before && bpf_l4_csum_replace(skb, icmp + 2, before, after, 2) < 0)
			return -1;
	}
	return 0;
}

/*
 * Translate the packet: its addresses with the checksums covering them, and
 * an ICMP error's quote. 0, or -1 when a store failed (only when unsharing
 * the skb fails): the packet is then half-translated and must be dropped.
 */
static __always_inline int edgeft_xlat_packet(struct __sk_buff *skb, __u32 family, const struct edgeft_xlat_job *job)
{
	struct edgeft_l4 l4;

	edgeft_find_l4(skb, family, &l4);
	__u32 csum_at = l4.off ? edgeft_pseudo_csum_at(family, l4.proto) : 0;

	if (csum_at) {
		__u16 c;

		csum_at += l4.off;
		if (bpf_skb_load_bytes(skb, csum_at, &c, 2) < 0)
			csum_at = 0; /* truncated: no transport checksum to fix */
	}
	if (edgeft_icmp_error(skb, family, &l4) && edgeft_xlat_quote(skb, family, l4.off, job) < 0)
		return -1;
	if (family == EDGEFT_AF_INET)
		return edgeft_write4(skb, ETH_HLEN, job->from, job->to, csum_at, l4.proto, 1);
	return edgeft_write6(skb, ETH_HLEN, job->from, job->to, csum_at, l4.proto, 1) < 0 ? -1 : 0;
}

#endif /* EDGEFT_XLAT_H */
