"""A test marked for pytest-asyncio that uses asyncq's fixtures is told what to do."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_an_asyncio_marked_test_is_told_to_use_anyio(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    asyncio: pytest-asyncio's marker\n")
    pytester.makepyfile(test_app="""
        import pytest

        @pytest.mark.asyncio
        async def test_enqueue(asyncq_client):
            await asyncq_client.enqueue("t")
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)  # (in set-up: the test body never runs)
    result.stdout.fnmatch_lines(["*asyncq's fixtures (asyncq_client) run on anyio: mark the "
                                 "test @pytest.mark.anyio*"])
