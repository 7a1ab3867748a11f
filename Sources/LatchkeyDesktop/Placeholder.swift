// Placeholder: the sd-bus wrapper and screen-lock watcher land here.
enum LatchkeyDesktopPlaceholder {}
