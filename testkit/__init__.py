"""What the test suite and the benchmarks both run: the scripted model upstream (``upstream``) and
the SQL statement counter (``querycount``)."""
