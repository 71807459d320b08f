"""The harness: what runs the suites, never what they check.

- ``kit``: a check, a suite, ``require``/``not_run``, concurrency helpers;
- ``certification``: ``Certification`` (what every suite is built from) and
  ``SuiteSpec``, the registry's entry;
- ``certify``: building the registered suites, running them to the end;
- ``deadline``: every check under a deadline;
- ``site``: fresh locations, several handles, a manual clock;
- ``surfaces``, ``probe``, ``failpause``: tools checks are written with;
- ``processes``: the one module that starts child processes;
- ``async_facade``, ``async_certify``: the asyncio path through the same suites.

The public names are re-exported by ``rulvar_conformance``; these module paths
may move.
"""
