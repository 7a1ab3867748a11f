import Foundation

/// A stand-in for pinentry, for tests of what the agent asks the user: a shell script that speaks enough
/// of the Assuan protocol, records what it is shown and answers from a file.
public enum StandInPinentry {
    /// The script: appends the SETDESC, SETPROMPT and SETOK lines it gets, and the name of each question
    /// (GETPIN, CONFIRM), to `shown`; answers the n-th question with line n of `answers`: no line
    /// cancels, `!wait` never answers, any other line is the PIN (GETPIN) or OK (CONFIRM).
    public static func script(shown: String, answers: String) -> String {
        """
        #!/bin/sh
        n=0
        echo "OK ready"
        while IFS= read -r line; do
          case "$line" in
            SETDESC*|SETPROMPT*|SETOK*) echo "$line" >> "\(shown)"; echo OK ;;
            GETPIN*|CONFIRM*)
              n=$((n + 1))
              echo "${line%% *}" >> "\(shown)"
              answer=$(sed -n "${n}p" "\(answers)" 2>/dev/null)
              if [ -z "$answer" ]; then echo "ERR 83886179 Operation cancelled"
              elif [ "$answer" = "!wait" ]; then exec sleep 600
              elif [ "${line%% *}" = GETPIN ]; then printf 'D %s\\nOK\\n' "$answer"
              else echo OK; fi ;;
            BYE*) echo OK; exit 0 ;;
            *) echo OK ;;
          esac
        done
        """
    }

    /// Writes the script to `path`, executable.
    public static func write(to path: String, shown: String, answers: String) throws {
        try script(shown: shown, answers: answers).write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
    }
}
