"""What the test suite and the benchmarks both run: the scripted model upstream (``upstream``),
the SQL statement counter (``querycount``), private PostgreSQL and Redis servers
(``services``), and Parley as a process of its own (``parley``)."""
