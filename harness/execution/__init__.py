"""A cell's life in a fresh process (internal): what to run (`cells`), the run as a whole
(`runner`: journal, resume, Ctrl-C), workers started, watched and stopped (`launcher`,
`processes`, `heartbeat`, `interrupts`), two cells at once timed alone (`overlap`,
`quiet_link`, `interference`), and what runs inside a worker (`worker`)."""
