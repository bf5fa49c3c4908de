/* coro.c - see coro.h. */
#include "coro.h"
#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#if defined(__linux__) && defined(__ELF__) && \
    ((defined(__x86_64__) && !defined(__ILP32__)) || defined(__aarch64__))
#define CORO_HAVE_ASM 1
#else
#define CORO_HAVE_ASM 0
#endif

#if CORO_HAVE_ASM
/* rnp_coro_switch(save, to): push the callee-saved registers on the running stack, store
 * the stack pointer in *save, load `to` (a stack pointer some earlier rnp_coro_switch
 * stored, or a frame coro_init built), pop that side's registers and return on its stack.
 * To its C caller it is an ordinary call that returns later, once another switch names
 * the saved stack again: callee-saved registers come back intact, caller-saved ones are
 * clobbered anyway, and memory is opaque to the compiler across the call.
 * rnp_coro_start: where a fresh coroutine's first switch returns to; it calls
 * entry(co) with both taken from the frame coro_init built (entry never returns). */
void rnp_coro_switch(void **save, void *to);
void rnp_coro_start(void);

#if defined(__x86_64__)
/* Frame on the stack, from the saved stack pointer up (as Boost.Context's fcontext: the
 * SysV callee-saved registers plus the SSE and x87 control words):
 *   [0] mxcsr (4 B), x87 control word (2 B), padding   [8] r12   [16] r13   [24] r14
 *   [32] r15   [40] rbx   [48] rbp   [56] return address
 * A fresh frame holds co in r12 and the entry function in r13. No endbr64 on
 * rnp_coro_start: it is reached by `ret`, which indirect-branch tracking does not check. */
#define CORO_FRAME_BYTES 64
__asm__(".pushsection .text\n"
        ".globl rnp_coro_switch\n"
        ".hidden rnp_coro_switch\n"
        ".type rnp_coro_switch,@function\n"
        ".p2align 4\n"
        "rnp_coro_switch:\n"
#if defined(__CET__)
        "    endbr64\n"
#endif
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r15\n"
        "    pushq %r14\n"
        "    pushq %r13\n"
        "    pushq %r12\n"
        "    leaq -8(%rsp), %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    leaq 8(%rsp), %rsp\n"
        "    popq %r12\n"
        "    popq %r13\n"
        "    popq %r14\n"
        "    popq %r15\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size rnp_coro_switch,.-rnp_coro_switch\n"
        ".globl rnp_coro_start\n"
        ".hidden rnp_coro_start\n"
        ".type rnp_coro_start,@function\n"
        ".p2align 4\n"
        "rnp_coro_start:\n"
        "    movq %r12, %rdi\n"
        "    callq *%r13\n"
        "    ud2\n"
        ".size rnp_coro_start,.-rnp_coro_start\n"
        ".popsection\n");
#else /* __aarch64__ */
/* Frame, from the saved stack pointer up (AAPCS64 callee-saved registers, as fcontext):
 *   [0..63] d8-d15   [64..143] x19-x28   [144] x29 (fp)   [152] x30 (lr: where `ret`
 *   goes)   [160..175] padding (the stack pointer stays 16-byte aligned)
 * A fresh frame holds co in x19 and the entry function in x20. */
#define CORO_FRAME_BYTES 176
__asm__(".pushsection .text\n"
        ".globl rnp_coro_switch\n"
        ".hidden rnp_coro_switch\n"
        ".type rnp_coro_switch,%function\n"
        ".p2align 4\n"
        "rnp_coro_switch:\n"
        CORO_A64_SAVE_CALLEE
        "    mov x9, sp\n"
        "    str x9, [x0]\n"
        "    mov sp, x1\n"
        CORO_A64_RESTORE_CALLEE
        "    ret\n"
        ".size rnp_coro_switch,.-rnp_coro_switch\n"
        ".globl rnp_coro_start\n"
        ".hidden rnp_coro_start\n"
        ".type rnp_coro_start,%function\n"
        ".p2align 4\n"
        "rnp_coro_start:\n"
        "    mov x0, x19\n"
        "    blr x20\n"
        "    brk #0\n"
        ".size rnp_coro_start,.-rnp_coro_start\n"
        ".popsection\n");
#endif
#endif /* CORO_HAVE_ASM */

int coro_asm_available(void)
{
#if !CORO_HAVE_ASM
    return 0;
#elif defined(__x86_64__)
    /* rdsspq leaves 0 unless a CET shadow stack is active (it is a NOP on CPUs and
     * kernels without one) */
    uint64_t ssp = 0;
    __asm__ volatile("rdsspq %0" : "+r"(ssp));
    return ssp == 0;
#else
    /* arm64 guarded control stack (Linux 6.13+); older kernels reject the call */
#ifndef PR_GET_SHADOW_STACK_STATUS
#define PR_GET_SHADOW_STACK_STATUS 74
#endif
    unsigned long status = 0;
    if (prctl(PR_GET_SHADOW_STACK_STATUS, &status, 0, 0, 0) == 0 && (status & 1u))
        return 0;
    return 1;
#endif
}

int coro_default_impl(void)
{
    return coro_asm_available() ? CORO_IMPL_ASM : CORO_IMPL_UCONTEXT;
}

const char *coro_impl_name(int impl)
{
    return impl == CORO_IMPL_ASM ? "asm" : impl == CORO_IMPL_UCONTEXT ? "ucontext" : "?";
}

/* The bottom of every coroutine: run the body, then leave for good (the last resume
 * returns; the stack is not touched again). */
static void coro_finish(struct coro *co) __attribute__((noreturn));

static void coro_finish(struct coro *co)
{
    co->done = 1;
#if CORO_HAVE_ASM
    if (co->impl == CORO_IMPL_ASM) {
        rnp_coro_switch(&co->sp, co->caller_sp);
        __builtin_unreachable();
    }
#endif
    setcontext(&co->caller_uc);
    abort(); /* setcontext failed: the resumer's context is gone */
}

#if CORO_HAVE_ASM
static void coro_asm_entry(struct coro *co) __attribute__((noreturn));

static void coro_asm_entry(struct coro *co)
{
    co->fn(co, co->arg);
    coro_finish(co);
}
#endif

/* makecontext passes int arguments only: the pointer travels in two halves */
static void coro_uc_entry(unsigned hi, unsigned lo)
{
    struct coro *co = (struct coro *)(uintptr_t)(((uint64_t)hi << 32) | (uint64_t)lo);
    co->fn(co, co->arg);
    coro_finish(co);
}

int coro_init(struct coro *co, int impl, coro_fn fn, void *arg)
{
    memset(co, 0, sizeof *co);
    if (impl == CORO_IMPL_AUTO)
        impl = coro_default_impl();
    if ((impl == CORO_IMPL_ASM && !coro_asm_available()) ||
        (impl != CORO_IMPL_ASM && impl != CORO_IMPL_UCONTEXT))
        return -1;
    co->stack = malloc(CORO_STACK_BYTES);
    if (!co->stack)
        return -1;
    co->impl = impl;
    co->fn = fn;
    co->arg = arg;
#if CORO_HAVE_ASM
    if (impl == CORO_IMPL_ASM) {
        /* the frame rnp_coro_switch pops, built 16 bytes below the 16-byte-aligned top so
         * that after its `ret` the stack pointer is 16-byte aligned, as a call needs */
        uintptr_t top = ((uintptr_t)co->stack + CORO_STACK_BYTES) & ~(uintptr_t)15;
        unsigned char *f = (unsigned char *)(top - 16 - CORO_FRAME_BYTES);
        memset(f, 0, CORO_FRAME_BYTES);
        uint64_t self = (uint64_t)(uintptr_t)co;
        uint64_t entry = (uint64_t)(uintptr_t)&coro_asm_entry;
        uint64_t start = (uint64_t)(uintptr_t)&rnp_coro_start;
#if defined(__x86_64__)
        /* the coroutine starts with the resumer's floating-point control state, as
         * fcontext's make_fcontext does */
        uint32_t mxcsr;
        uint16_t fpucw;
        __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
        __asm__ volatile("fnstcw %0" : "=m"(fpucw));
        memcpy(f + 0, &mxcsr, 4);
        memcpy(f + 4, &fpucw, 2);
        memcpy(f + 8, &self, 8);   /* r12 */
        memcpy(f + 16, &entry, 8); /* r13 */
        memcpy(f + 56, &start, 8); /* return address */
#else
        memcpy(f + 64, &self, 8);   /* x19 */
        memcpy(f + 72, &entry, 8);  /* x20 */
        memcpy(f + 152, &start, 8); /* x30 */
#endif
        co->sp = f;
        return 0;
    }
#endif
    if (getcontext(&co->uc) != 0) {
        free(co->stack);
        co->stack = NULL;
        return -1;
    }
    co->uc.uc_stack.ss_sp = co->stack;
    co->uc.uc_stack.ss_size = CORO_STACK_BYTES;
    co->uc.uc_link = NULL; /* coro_uc_entry never returns: coro_finish leaves */
    uint64_t p = (uint64_t)(uintptr_t)co;
    makecontext(&co->uc, (void (*)(void))coro_uc_entry, 2, (unsigned)(p >> 32),
                (unsigned)(p & 0xFFFFFFFFu));
    return 0;
}

void coro_resume(struct coro *co)
{
    if (co->done)
        return;
#if CORO_HAVE_ASM
    if (co->impl == CORO_IMPL_ASM) {
        rnp_coro_switch(&co->caller_sp, co->sp);
        return;
    }
#endif
    swapcontext(&co->caller_uc, &co->uc);
}

void coro_yield(struct coro *co)
{
#if CORO_HAVE_ASM
    if (co->impl == CORO_IMPL_ASM) {
        rnp_coro_switch(&co->sp, co->caller_sp);
        return;
    }
#endif
    swapcontext(&co->uc, &co->caller_uc);
}

void coro_free(struct coro *co)
{
    free(co->stack);
    co->stack = NULL;
}

/* ---- the bare switch point ----------------------------------------------------------- */

/* yields straight back until told to stop; `arg` is the scheduler's stop flag */
static void bench_body(struct coro *co, void *arg)
{
    const int *stop = arg;
    while (!*stop)
        coro_yield(co);
}

int coro_bench_switch(int k, int impl, long warmup, long iters, double *elapsed_s)
{
    if (k < 1)
        return -1;
    struct coro *cos = calloc((size_t)k, sizeof *cos);
    if (!cos)
        return -1;
    int stop = 0, made = 0;
    for (; made < k; made++)
        if (coro_init(&cos[made], impl, bench_body, &stop) != 0)
            break;
    int rc = made == k ? 0 : -1;
    if (rc == 0) {
        /* the round-robin index wraps by comparison: i % k would add a division to
         * every pair */
        int j = 0;
        for (long i = 0; i < warmup; i++) {
            coro_resume(&cos[j]);
            if (++j == k)
                j = 0;
        }
        uint64_t t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            coro_resume(&cos[j]);
            if (++j == k)
                j = 0;
        }
        uint64_t t1 = now_ns();
        *elapsed_s = (double)(t1 - t0) * 1e-9;
    }
    /* let every coroutine return (a never-started one runs its body once and returns) */
    stop = 1;
    for (int i = 0; i < made; i++) {
        coro_resume(&cos[i]);
        coro_free(&cos[i]);
    }
    free(cos);
    return rc;
}
