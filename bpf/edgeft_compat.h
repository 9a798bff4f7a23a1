/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One source, two toolchains (docs/decisions.md, "compile once"):
 *  - bcc on the target (ebpf_failover_loader: bcc): bcc's helpers.h comes
 *    first and defines BPF_TABLE; maps are bcc tables, headers the kernel's.
 *  - clang -target bpf once per build settings (ebpf_failover_loader: object),
 *    loaded with libbpf: UAPI headers and libbpf's bpf_helpers.h; maps are
 *    BTF-defined .maps, programs sit in SEC("tc").
 * Everything that differs between the two is here, so the programs read the
 * same for both.
 */
#ifndef EDGEFT_COMPAT_H
#define EDGEFT_COMPAT_H

#ifdef BPF_TABLE
#include <uapi/linux/bpf.h>
#include <uapi/linux/pkt_cls.h>
#include <uapi/linux/if_ether.h>

/* bcc names a program by its function; the section is its own. */
#define EDGEFT_PROG
/* bcc rewrites map.lookup() only outside macros: one function per map,
 * written out in failover_tc.c (bcc rewrites only the main file). */
#define EDGEFT_LOOKUP(map, key) map##_find(key)
#define EDGEFT_BCC_HASH "hash"
#define EDGEFT_BCC_ARRAY "array"
#define EDGEFT_BCC_PERCPU_ARRAY "percpu_array"
/* With EDGEFT_PIN_DIR (-DEDGEFT_PIN_DIR="/sys/fs/bpf/edgeft") bcc opens
 * <dir>/<name> if pinned, else creates and pins it. */
#ifdef EDGEFT_PIN_DIR
#define EDGEFT_MAP(type, key, val, name, max) \
	BPF_TABLE_PINNED(EDGEFT_BCC_##type, key, val, name, max, EDGEFT_PIN_DIR "/" #name)
#else
#define EDGEFT_MAP(type, key, val, name, max) BPF_TABLE(EDGEFT_BCC_##type, key, val, name, max)
#endif
/* A ring buffer as bcc's BPF_RINGBUF_OUTPUT declares one (bytes, not pages),
 * pinned like the tables when EDGEFT_PIN_DIR is set: bcc strips the ":path"
 * from the section before it reads the map type. */
#define EDGEFT_RINGBUF_TABLE(name, bytes, where) \
	struct name##_table_t { \
		int key; \
		u32 leaf; \
		int (*ringbuf_output)(void *, u64, u64); \
		u32 max_entries; \
	}; \
	__attribute__((section(where))) struct name##_table_t name = { .max_entries = (bytes) }
#ifdef EDGEFT_PIN_DIR
#define EDGEFT_RINGBUF(name, bytes) EDGEFT_RINGBUF_TABLE(name, bytes, "maps/ringbuf:" EDGEFT_PIN_DIR "/" #name)
#else
#define EDGEFT_RINGBUF(name, bytes) EDGEFT_RINGBUF_TABLE(name, bytes, "maps/ringbuf")
#endif

#else /* clang -target bpf, loaded by libbpf */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define EDGEFT_PROG SEC("tc")
#define EDGEFT_LOOKUP(map, key) bpf_map_lookup_elem(&(map), (key))
/* No pinning attribute: the loader sets each map's pin path under the host's
 * pin root, where libbpf reuses a compatible pinned map or creates and pins one. */
#define EDGEFT_MAP(kind, key_type, value_type, name, max) \
	struct { \
		__uint(type, BPF_MAP_TYPE_##kind); \
		__type(key, key_type); \
		__type(value, value_type); \
		__uint(max_entries, max); \
	} name SEC(".maps")
#define EDGEFT_RINGBUF(name, bytes) \
	struct { \
		__uint(type, BPF_MAP_TYPE_RINGBUF); \
		__uint(max_entries, bytes); \
	} name SEC(".maps")
#endif

#endif /* EDGEFT_COMPAT_H */
