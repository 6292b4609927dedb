/*
 * The launch gate.  Applying the plan remaps weight chunks: a kernel that
 * another thread enqueues between the device synchronisation and the new
 * mappings would run on unmapped or half-filled memory, and one whose
 * executor step ran before the plan would run after it without its loads.
 * So every hook that enqueues work the executor serves counts itself in
 * around that step and the real call (ft_gate_enter / ft_gate_leave), and
 * the plan's application closes the gate: new entrants wait until it opens,
 * and closing waits until the threads inside have left (the closing thread
 * itself may be inside, and its own calls while it is closed pass).
 * Nesting on one thread counts once.
 *
 * Whoever closes must hold no lock that a thread inside takes before it
 * leaves (the engine's lock, in particular).
 */
#ifndef FT_GATE_H
#define FT_GATE_H

void ft_gate_enter(void);
void ft_gate_leave(void);
void ft_gate_close(void);
void ft_gate_open(void);
/* In a fork child (one thread): the parent's other threads are not
 * inside, and no one closes. */
void ft_gate_after_fork(void);

#endif
