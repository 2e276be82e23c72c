# mk/install.mk — `make install` and `make uninstall` (included by the top Makefile).
#
#   make install [PREFIX=/usr/local] [DESTDIR=] [BINDIR= LIBDIR= MANDIR= DOCDIR=]
#     $(BINDIR)/npupool                  the command
#     $(LIBDIR)/libnpupool.so            the preload library (LD_PRELOAD=$(LIBDIR)/libnpupool.so)
#     $(MANDIR)/man1/npupool.1           the command's manual (docs/man/, `make man`)
#     $(MANDIR)/man7/npupool.7           the environment variables and the report format
#     $(DOCDIR)/                         README, LICENSE, docs/*.md, the report schema
# DESTDIR is prepended to every path (staging for a package); nothing else is written.  The
# library needs no ldconfig: it is loaded by path.  `npupool version` finds the library it
# reports on next to itself or in ../lib, ../lib64 (a LIBDIR elsewhere is not found).

PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
MANDIR  ?= $(PREFIX)/share/man
DOCDIR  ?= $(PREFIX)/share/doc/npupool
INSTALL ?= install
INSTALL_DOCS := README.md LICENSE docs/architecture.md docs/metrics.md docs/report.md docs/report-schema.json \
                docs/tools.md docs/trace.md

.PHONY: install uninstall
install: all
	$(INSTALL) -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(LIBDIR)' '$(DESTDIR)$(MANDIR)/man1' \
	    '$(DESTDIR)$(MANDIR)/man7' '$(DESTDIR)$(DOCDIR)'
	$(INSTALL) -m 755 $(NPUPOOL_CLI) '$(DESTDIR)$(BINDIR)/npupool'
	$(INSTALL) -m 755 $(SHIM_LIB) '$(DESTDIR)$(LIBDIR)/libnpupool.so'
	$(INSTALL) -m 644 docs/man/npupool.1 '$(DESTDIR)$(MANDIR)/man1/npupool.1'
	$(INSTALL) -m 644 docs/man/npupool.7 '$(DESTDIR)$(MANDIR)/man7/npupool.7'
	$(INSTALL) -m 644 $(INSTALL_DOCS) '$(DESTDIR)$(DOCDIR)/'

uninstall:
	rm -f '$(DESTDIR)$(BINDIR)/npupool' '$(DESTDIR)$(LIBDIR)/libnpupool.so' \
	    '$(DESTDIR)$(MANDIR)/man1/npupool.1' '$(DESTDIR)$(MANDIR)/man7/npupool.7'
	rm -f $(addprefix '$(DESTDIR)$(DOCDIR)'/,$(notdir $(INSTALL_DOCS)))
	-rmdir '$(DESTDIR)$(DOCDIR)' 2>/dev/null
