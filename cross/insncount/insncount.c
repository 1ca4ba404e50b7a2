/*
 * insncount: a QEMU TCG plugin that counts the guest instructions a
 * qemu-user run executes (all threads) and prints the total to stderr at
 * exit as "insncount: N". Used by cross/kernel-insns.sh to compare the
 * arm64 NEON kernels of auxue/nn with the portable Go kernels: qemu cannot
 * time arm64 code, but it executes exactly the guest's instructions.
 *
 * Debian's qemu-user ships no plugin headers, so the few declarations of
 * QEMU's plugin API (include/qemu/qemu-plugin.h, API version 1, QEMU 7.2)
 * this file uses are written out below.
 *
 * Build: gcc -O2 -shared -fPIC -o insncount.so insncount.c
 * Use:   qemu-aarch64 -plugin ./insncount.so PROGRAM
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;

enum qemu_plugin_cb_flags {
	QEMU_PLUGIN_CB_NO_REGS,
	QEMU_PLUGIN_CB_R_REGS,
	QEMU_PLUGIN_CB_RW_REGS,
};

typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
					  enum qemu_plugin_cb_flags flags, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

static uint64_t executed;

/* Every execution of a translation block adds its instruction count. */
static void tb_exec(unsigned int vcpu_index, void *userdata)
{
	(void)vcpu_index;
	__atomic_fetch_add(&executed, (uint64_t)(uintptr_t)userdata, __ATOMIC_RELAXED);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	size_t n = qemu_plugin_tb_n_insns(tb);
	qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)n);
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
	(void)id;
	(void)userdata;
	fprintf(stderr, "insncount: %" PRIu64 "\n", __atomic_load_n(&executed, __ATOMIC_RELAXED));
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
							     int argc, char **argv)
{
	(void)info;
	(void)argc;
	(void)argv;
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
