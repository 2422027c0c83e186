"""Run-time utilities every stage may use: the cores a process may use, room in pipes,
progress bars, the run's timeline, and ffmpeg's binary and track lengths."""
