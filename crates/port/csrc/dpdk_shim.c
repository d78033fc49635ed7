/* Thin wrappers over DPDK's inline functions (rx/tx bursts, mbuf access),
 * so the Rust side links plain symbols. Built only with the `dpdk` feature. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <rte_eal.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_lcore.h>
#include <rte_memcpy.h>

int sl_eal_init(int argc, char **argv) { return rte_eal_init(argc, argv); }
int sl_dev_probe(const char *devargs) { return rte_dev_probe(devargs); }
int sl_port_by_name(const char *name, uint16_t *port) { return rte_eth_dev_get_port_by_name(name, port); }

struct rte_mempool *sl_pool_create(const char *name, unsigned n) {
    return rte_pktmbuf_pool_create(name, n, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
}

/* Configures nq rx and nq tx queues (RSS over IP/TCP/UDP when nq > 1 and
 * the device hashes), each rx queue filling from mps[q], and starts the
 * device. */
int sl_port_start(uint16_t port, struct rte_mempool *const *mps, uint16_t nq, uint16_t nb_desc) {
    struct rte_eth_conf conf;
    struct rte_eth_dev_info info;
    memset(&conf, 0, sizeof conf);
    int rc = rte_eth_dev_info_get(port, &info);
    if (rc < 0) return rc;
    uint64_t rss = info.flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP);
    if (nq > 1 && rss) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf = rss;
    }
    rc = rte_eth_dev_configure(port, nq, nq, &conf);
    if (rc < 0) return rc;
    uint16_t rxd = nb_desc, txd = nb_desc;
    rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
    int sock = rte_eth_dev_socket_id(port);
    for (uint16_t q = 0; q < nq; q++) {
        rc = rte_eth_rx_queue_setup(port, q, rxd, sock < 0 ? 0 : (unsigned)sock, NULL, mps[q]);
        if (rc < 0) return rc;
        rc = rte_eth_tx_queue_setup(port, q, txd, sock < 0 ? 0 : (unsigned)sock, NULL);
        if (rc < 0) return rc;
    }
    rc = rte_eth_dev_start(port);
    if (rc < 0) return rc;
    rte_eth_promiscuous_enable(port); /* not every PMD has it */
    return 0;
}

/* How many rx and tx queues the device can have. */
int sl_max_queues(uint16_t port, uint16_t *rxq, uint16_t *txq) {
    struct rte_eth_dev_info info;
    int rc = rte_eth_dev_info_get(port, &info);
    if (rc < 0) return rc;
    *rxq = info.max_rx_queues; *txq = info.max_tx_queues;
    return 0;
}

void sl_port_stop(uint16_t port) { rte_eth_dev_stop(port); rte_eth_dev_close(port); }
/* ipackets, opackets, imissed, ierrors, oerrors, rx_nombuf */
int sl_stats(uint16_t port, uint64_t out[6]) {
    struct rte_eth_stats s;
    int rc = rte_eth_stats_get(port, &s);
    if (rc < 0) return rc;
    out[0] = s.ipackets; out[1] = s.opackets; out[2] = s.imissed;
    out[3] = s.ierrors; out[4] = s.oerrors; out[5] = s.rx_nombuf;
    return 0;
}

/* Zero copy. The Rust side reads and writes the few mbuf fields a packet
 * needs at these offsets (crates/port/src/dpdk/mbuf.rs): a DPDK whose
 * rte_mbuf differs fails here, at build time. The mbufs of Sluice's pools
 * are direct and have no private area, so a buffer's start (buf_addr) is
 * the header's end: the datapath names an mbuf by its buffer. */
_Static_assert(offsetof(struct rte_mbuf, buf_addr) == 0, "rte_mbuf layout");
_Static_assert(offsetof(struct rte_mbuf, data_off) == 16, "rte_mbuf layout");
_Static_assert(offsetof(struct rte_mbuf, nb_segs) == 20, "rte_mbuf layout");
_Static_assert(offsetof(struct rte_mbuf, ol_flags) == 24, "rte_mbuf layout");
_Static_assert(offsetof(struct rte_mbuf, pkt_len) == 36, "rte_mbuf layout");
_Static_assert(offsetof(struct rte_mbuf, data_len) == 40, "rte_mbuf layout");
_Static_assert(offsetof(struct rte_mbuf, vlan_tci) == 42, "rte_mbuf layout");
_Static_assert(offsetof(struct rte_mbuf, hash) == 44, "rte_mbuf layout");
_Static_assert(offsetof(struct rte_mbuf, buf_len) == 54, "rte_mbuf layout");
_Static_assert(sizeof(struct rte_mbuf) == 128, "rte_mbuf layout");
_Static_assert((RTE_MBUF_F_INDIRECT | RTE_MBUF_F_EXTERNAL) == 0x6000000000000000ULL, "rte_mbuf flags");
_Static_assert(RTE_MBUF_F_RX_RSS_HASH == 2, "rte_mbuf flags");

uint16_t sl_rx_burst(uint16_t port, uint16_t q, struct rte_mbuf **m, uint16_t n) {
    return rte_eth_rx_burst(port, q, m, n);
}

uint16_t sl_tx_burst(uint16_t port, uint16_t q, struct rte_mbuf **m, uint16_t n) {
    return rte_eth_tx_burst(port, q, m, n);
}

void sl_free_mbufs(struct rte_mbuf **m, unsigned n) { rte_pktmbuf_free_bulk(m, n); }

/* The rare packet that cannot be used in place (chained, or in a buffer
 * the driver attached): copied into dst (cap bytes) and freed. Returns
 * its length, or 0 when it did not fit. */
uint32_t sl_copy_out(struct rte_mbuf *m, uint8_t *dst, uint32_t cap) {
    uint32_t len = rte_pktmbuf_pkt_len(m);
    const void *p = len <= cap ? rte_pktmbuf_read(m, 0, len, dst) : NULL;
    if (!p) len = 0;
    else if (p != dst) rte_memcpy(dst, p, len);
    rte_pktmbuf_free(m);
    return len;
}

/* A fresh mbuf from mp holding a copy of len bytes at src; NULL when the
 * pool is empty or len exceeds its data room. */
struct rte_mbuf *sl_copy_in(struct rte_mempool *mp, const uint8_t *src, uint16_t len) {
    struct rte_mbuf *b = rte_pktmbuf_alloc(mp);
    uint8_t *d = b ? (uint8_t *)rte_pktmbuf_append(b, len) : NULL;
    if (!d) {
        if (b) rte_pktmbuf_free(b);
        return NULL;
    }
    rte_memcpy(d, src, len);
    return b;
}

/* n fresh mbufs from mp, in one take from the pool, holding copies of the
 * lens[i] bytes at srcs[i], into out[0..n]. 0, or negative (nothing taken)
 * when the pool has fewer than n free; every lens[i] must fit the data
 * room (the caller checks). */
int sl_copy_in_bulk(struct rte_mempool *mp, const uint8_t *const *srcs, const uint16_t *lens,
                    struct rte_mbuf **out, unsigned n) {
    int rc = rte_pktmbuf_alloc_bulk(mp, out, n);
    if (rc != 0) return rc;
    for (unsigned i = 0; i < n; i++) {
        struct rte_mbuf *b = out[i];
        b->data_len = lens[i];
        b->pkt_len = lens[i];
        rte_memcpy(rte_pktmbuf_mtod(b, uint8_t *), srcs[i], lens[i]);
    }
    return 0;
}

/* Frees a pool none of whose mbufs is in use (a start that failed). */
void sl_pool_free(struct rte_mempool *mp) { rte_mempool_free(mp); }

/* Free mbufs of a pool (a leak check). */
unsigned sl_pool_avail(const struct rte_mempool *mp) { return rte_mempool_avail_count(mp); }

/* Gives the calling (non-EAL) thread an lcore id, so mempool per-lcore
 * caches serve its allocations instead of the shared ring. */
int sl_thread_register(void) { return rte_lcore_id() == LCORE_ID_ANY ? rte_thread_register() : 0; }
