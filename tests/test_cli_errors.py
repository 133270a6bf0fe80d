"""run_main: user faults and Ctrl-C end in one line and an exit code; bugs keep their traceback."""

import errno

import pytest

from episodes.util.cli_errors import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    UserError,
    interrupt_behind,
    run_main,
    user_faults,
)


def _raising(exc):
    def main(argv):
        raise exc

    return main


def test_user_error_is_one_line(capsys):
    assert run_main(_raising(UserError("--ways 0: expected >= 1"))) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == "error: --ways 0: expected >= 1\n"


def test_permission_error_names_path_and_what_to_do(capsys):
    exc = PermissionError(errno.EACCES, "Permission denied", "/ro/out")
    assert run_main(_raising(exc)) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "/ro/out: Permission denied" in err and "--output" in err


def test_unwritable_output_wrapped_by_a_library_is_one_line(capsys):
    def main(argv):
        try:
            raise PermissionError(errno.EPERM, "Operation not permitted", "/ro/out/x.tfrecords")
        except OSError as exc:
            raise RuntimeError("pipeline failed: [while running 'Write']") from exc

    assert run_main(main) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "/ro/out/x.tfrecords: Operation not permitted" in err
    with pytest.raises(RuntimeError):  # any other wrapped error is a bug: traceback
        run_main(_raising(RuntimeError("boom")))


def test_ctrl_c_prints_the_given_line(capsys):
    code = run_main(_raising(KeyboardInterrupt()), interrupted=lambda: "resume: rerun it")
    assert code == EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == "resume: rerun it"


def test_an_interrupt_a_library_wrapped_is_still_an_interrupt(capsys):
    """torch.save stopped mid-write by Ctrl-C or SIGTERM raises RuntimeError("unexpected pos")
    while handling the KeyboardInterrupt: the command still ends in its interrupted line."""

    def main(argv):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 8")  # noqa: B904 (as torch does)

    code = run_main(main, interrupted="interrupted: resume with the same command")
    assert code == EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == "interrupted: resume with the same command"
    assert interrupt_behind(RuntimeError("unexpected pos")) is None


def test_extra_errors_and_bugs():
    class PackageError(ValueError):
        pass

    assert run_main(_raising(PackageError("bad")), extra_errors=(PackageError,)) == EXIT_USAGE
    with pytest.raises(ZeroDivisionError):
        run_main(_raising(ZeroDivisionError()))


def test_success_passes_the_code_through():
    assert run_main(lambda argv: 0) == 0
    assert run_main(lambda argv: 3, ["x"]) == 3


def test_user_faults_decorator_is_one_line_for_the_listed_types_only(capsys):
    class SpecFault(ValueError):
        pass

    @user_faults(SpecFault, FileNotFoundError)
    def main(argv=None):
        """Doc kept."""
        raise argv

    assert main.__name__ == "main" and main.__doc__ == "Doc kept."
    assert main(SpecFault("spec.json: expected a JSON object")) == EXIT_USAGE
    assert capsys.readouterr().err == "error: spec.json: expected a JSON object\n"
    assert main(UserError("--ways 0: expected >= 1")) == EXIT_USAGE  # always a user fault
    assert capsys.readouterr().err == "error: --ways 0: expected >= 1\n"
    missing = FileNotFoundError(errno.ENOENT, "No such file or directory", "/data/x")
    assert main(missing) == EXIT_USAGE
    assert capsys.readouterr().err == "error: /data/x: No such file or directory (check the path)\n"
    with pytest.raises(ValueError, match="a bug"):  # not listed: keeps its traceback
        main(ValueError("a bug"))
    assert main.__wrapped__ is not None
