/* coro.h - minimal stackful coroutines for the coro sweep (device-free, unit tested by
 * test_probe.c).
 *
 * DrTM+H's worker threads run coroutines (Boost.Coroutine on Boost.Context's fcontext):
 * each posts a one-sided READ and yields to a scheduler, which polls the CQs and resumes
 * the coroutines whose READs completed. The coro sweep measures that loop, so the switch
 * must cost what fcontext costs: a hand-written switch that saves the callee-saved
 * registers on the running stack, swaps the stack pointer and restores the other side's
 * registers (x86-64 and aarch64), with no system call. glibc's swapcontext makes a
 * sigprocmask system call per switch and would measure the kernel instead; it is only the
 * fallback on other architectures and where the asm switch cannot run (a process with a
 * hardware shadow stack: CET on x86-64, GCS on aarch64 - the asm switch returns into
 * another stack, which a shadow stack forbids, while glibc's ucontext handles it).
 *
 * Use: one scheduler resumes coroutines; a coroutine yields back to whoever resumed it.
 * A coroutine runs fn(co, arg) on its own CORO_STACK_BYTES stack; when fn returns the
 * coroutine is done and its last resume returns. Not thread-safe: a coroutine belongs to
 * the thread that created it. */
#ifndef RNP_CORO_H
#define RNP_CORO_H

#include <stddef.h>
#include <ucontext.h>

#define CORO_STACK_BYTES (64u * 1024u)

enum coro_impl {
    CORO_IMPL_AUTO = 0, /* coro_default_impl() */
    CORO_IMPL_ASM,      /* the hand-written switch ("asm") */
    CORO_IMPL_UCONTEXT, /* glibc swapcontext ("ucontext") */
};

struct coro;
typedef void (*coro_fn)(struct coro *co, void *arg);

struct coro {
    int impl;        /* CORO_IMPL_ASM or CORO_IMPL_UCONTEXT, fixed by coro_init */
    int done;        /* fn returned; resuming it again does nothing */
    coro_fn fn;
    void *arg;
    void *stack;     /* malloc'd CORO_STACK_BYTES, freed by coro_free */
    void *sp;        /* asm: the coroutine's stack pointer while it is suspended */
    void *caller_sp; /* asm: the resumer's stack pointer while the coroutine runs */
    ucontext_t uc, caller_uc; /* ucontext: the same two contexts */
};

/* 1 when this build has the asm switch for its architecture (x86-64, aarch64) and the
 * process runs without a hardware shadow stack, so CORO_IMPL_ASM works. */
int coro_asm_available(void);
/* CORO_IMPL_ASM when available, else CORO_IMPL_UCONTEXT. */
int coro_default_impl(void);
/* "asm" or "ucontext" (the `switch_impl` of SCHEMA.md); "?" for anything else. */
const char *coro_impl_name(int impl);

/* Prepare co to run fn(co, arg) at its first coro_resume, on a fresh malloc'd stack.
 * impl CORO_IMPL_AUTO picks coro_default_impl(). Returns 0, or -1 (nothing allocated)
 * when the stack cannot be allocated or the asm switch was asked for and is unavailable. */
int coro_init(struct coro *co, int impl, coro_fn fn, void *arg);
/* Run co until it yields or returns. Call it from outside co (the scheduler). */
void coro_resume(struct coro *co);
/* From inside co: back to the coro_resume that ran it. */
void coro_yield(struct coro *co);
/* Free co's stack. co must not be running; a suspended coroutine is simply dropped (its
 * stack is released without unwinding: its body must own nothing but stack memory). */
void coro_free(struct coro *co);

/* The bare switch point of the coro sweep: k coroutines that yield straight back, resumed
 * round robin by a scheduler loop; `warmup` resume+yield pairs, then `iters` timed ones.
 * Sets *elapsed_s to the wall time (CLOCK_MONOTONIC) of the timed pairs; one pair is
 * scheduler -> coroutine -> scheduler. Returns 0, or -1 when a coroutine cannot be
 * created (out of memory, or impl unavailable). */
int coro_bench_switch(int k, int impl, long warmup, long iters, double *elapsed_s);

/* The AAPCS64 callee-saved frame of the aarch64 context switch, as assembler text: d8-d15
 * at sp+0..63, x19-x28 at +64..143, x29/x30 at +144, 176 bytes in all (sp stays 16-byte
 * aligned). Shared with the unit tests' register check, which builds the same frame. */
#define CORO_A64_SAVE_CALLEE                                                                  \
    "    sub sp, sp, #176\n"                                                                  \
    "    stp d8, d9, [sp, #0]\n"                                                              \
    "    stp d10, d11, [sp, #16]\n"                                                           \
    "    stp d12, d13, [sp, #32]\n"                                                           \
    "    stp d14, d15, [sp, #48]\n"                                                           \
    "    stp x19, x20, [sp, #64]\n"                                                           \
    "    stp x21, x22, [sp, #80]\n"                                                           \
    "    stp x23, x24, [sp, #96]\n"                                                           \
    "    stp x25, x26, [sp, #112]\n"                                                          \
    "    stp x27, x28, [sp, #128]\n"                                                          \
    "    stp x29, x30, [sp, #144]\n"
#define CORO_A64_RESTORE_CALLEE                                                               \
    "    ldp d8, d9, [sp, #0]\n"                                                              \
    "    ldp d10, d11, [sp, #16]\n"                                                           \
    "    ldp d12, d13, [sp, #32]\n"                                                           \
    "    ldp d14, d15, [sp, #48]\n"                                                           \
    "    ldp x19, x20, [sp, #64]\n"                                                           \
    "    ldp x21, x22, [sp, #80]\n"                                                           \
    "    ldp x23, x24, [sp, #96]\n"                                                           \
    "    ldp x25, x26, [sp, #112]\n"                                                          \
    "    ldp x27, x28, [sp, #128]\n"                                                          \
    "    ldp x29, x30, [sp, #144]\n"                                                          \
    "    add sp, sp, #176\n"

#endif
