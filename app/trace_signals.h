// The tracer's stop signals (SIGINT, SIGTERM, SIGHUP) and its children's exits, as the tracing
// loop needs them: which signal came, from where, and whether it came after the command had
// already exited on its own.
#pragma once

#include <sys/types.h>

#include <csignal>

namespace ingero::app::trace_detail {

// The signal that stops the session (0: none yet), and whether a terminal sent it to the whole
// foreground group (the command got it too).
extern volatile sig_atomic_t g_stop_signal;
extern volatile sig_atomic_t g_signal_from_tty;
// How many stop signals came: a second one cuts short what the session's end waits for.
extern volatile sig_atomic_t g_stop_signals;

// From the start, before the file is opened and the probes attached (a second or more on a
// busy host): a signal then ends the session as one while tracing does, never the tracer. A
// child's exit (SIGCHLD) is noted with its time, and wakes the loop's wait on the rings.
void install_signal_handlers();

// The stop signal's name ("SIGINT", "SIGQUIT", ...).
const char* signal_name(int sig);

// The traced command, once started: its exit is the one signal_came_after_child_exit() weighs
// (the tracer's other children, NVML's own process, end when they end).
void note_command_pid(pid_t pid);

// Whether the first stop signal came after the traced command exited: the command, having
// exited on its own, ended the session, and a Ctrl-C a moment later did not (it was recorded as
// the reason). A terminal's Ctrl-C that kills the command comes before its exit.
bool signal_came_after_child_exit();

}  // namespace ingero::app::trace_detail
